package bootcfg

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"
)

// Legacy uImage header values (U-Boot include/image.h).
const (
	ImageMagic      = 0x27051956 // IH_MAGIC
	ImageHeaderSize = 64         // sizeof(struct legacy_img_hdr)
	ImageNameLen    = 32         // IH_NMLEN
	ImageOSLinux    = 5          // IH_OS_LINUX
	ImageArchARM    = 2          // IH_ARCH_ARM
	ImageTypeScript = 6          // IH_TYPE_SCRIPT
	ImageCompNone   = 0          // IH_COMP_NONE
)

// ImageHeader is a legacy uImage header (struct legacy_img_hdr), all
// fields big-endian on the wire.
type ImageHeader struct {
	Magic     uint32
	HeaderCRC uint32 // CRC-32 (IEEE) of the 64 header bytes with this field zero
	Time      uint32 // seconds since 1970
	Size      uint32 // bytes after the header
	Load, EP  uint32
	DataCRC   uint32 // CRC-32 (IEEE) of the bytes after the header
	OS        uint8
	Arch      uint8
	Type      uint8
	Comp      uint8
	Name      string // up to 32 bytes, NUL padding removed
}

// ScriptImage wraps a U-Boot hush script in a legacy script image, the
// bytes `mkimage -A arm -O linux -T script -C none -n NAME -d FILE` writes:
// the 64-byte header (load and entry 0, time mtime, name cut to 32 bytes),
// then the data: the script's length as a big-endian uint32, a zero uint32
// ending the length list, and the script (tools/mkimage.c writes
// multi-file and script images so; cmd/source.c image_source_script reads
// the first length and skips to the word after the zero). U-Boot ignores
// the arch of script images, so arm serves every board.
func ScriptImage(script []byte, name string, mtime time.Time) []byte {
	b := make([]byte, ImageHeaderSize+8+len(script))
	data := b[ImageHeaderSize:]
	binary.BigEndian.PutUint32(data[0:], uint32(len(script)))
	binary.BigEndian.PutUint32(data[4:], 0)
	copy(data[8:], script)

	h := b[:ImageHeaderSize]
	binary.BigEndian.PutUint32(h[0:], ImageMagic)
	binary.BigEndian.PutUint32(h[8:], uint32(mtime.Unix()))
	binary.BigEndian.PutUint32(h[12:], uint32(len(data)))
	// load (16) and entry point (20) stay 0
	binary.BigEndian.PutUint32(h[24:], crc32.ChecksumIEEE(data))
	h[28], h[29], h[30], h[31] = ImageOSLinux, ImageArchARM, ImageTypeScript, ImageCompNone
	copy(h[32:64], name) // like image_set_name: no NUL when the name fills all 32 bytes
	binary.BigEndian.PutUint32(h[4:], crc32.ChecksumIEEE(h))
	return b
}

// Errors of ParseScriptImage, for errors.Is.
var (
	ErrNotImage  = errors.New("not a legacy U-Boot image")
	ErrBadCRC    = errors.New("CRC mismatch")
	ErrNotScript = errors.New("not a script image")
)

// ParseScriptImage checks a legacy script image as U-Boot's source command
// does with verify set (magic, header CRC, data CRC, type script, a
// non-zero first length) and returns its header and the script (the first
// component). Bytes after the header's data size are ignored.
func ParseScriptImage(b []byte) (ImageHeader, []byte, error) {
	var h ImageHeader
	if len(b) < ImageHeaderSize {
		return h, nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrNotImage, len(b), ImageHeaderSize)
	}
	hb := b[:ImageHeaderSize]
	h = ImageHeader{
		Magic:     binary.BigEndian.Uint32(hb[0:]),
		HeaderCRC: binary.BigEndian.Uint32(hb[4:]),
		Time:      binary.BigEndian.Uint32(hb[8:]),
		Size:      binary.BigEndian.Uint32(hb[12:]),
		Load:      binary.BigEndian.Uint32(hb[16:]),
		EP:        binary.BigEndian.Uint32(hb[20:]),
		DataCRC:   binary.BigEndian.Uint32(hb[24:]),
		OS:        hb[28],
		Arch:      hb[29],
		Type:      hb[30],
		Comp:      hb[31],
		Name:      string(hb[32:64]),
	}
	if i := bytes.IndexByte(hb[32:64], 0); i >= 0 {
		h.Name = string(hb[32 : 32+i])
	}
	if h.Magic != ImageMagic {
		return h, nil, fmt.Errorf("%w: magic %#08x, want %#08x", ErrNotImage, h.Magic, uint32(ImageMagic))
	}
	var zeroed [ImageHeaderSize]byte
	copy(zeroed[:], hb)
	binary.BigEndian.PutUint32(zeroed[4:], 0)
	if got := crc32.ChecksumIEEE(zeroed[:]); got != h.HeaderCRC {
		return h, nil, fmt.Errorf("header: %w: computed %#08x, header says %#08x", ErrBadCRC, got, h.HeaderCRC)
	}
	if uint64(len(b)-ImageHeaderSize) < uint64(h.Size) {
		return h, nil, fmt.Errorf("%w: header says %d data bytes, %d follow", ErrNotImage, h.Size, len(b)-ImageHeaderSize)
	}
	data := b[ImageHeaderSize : ImageHeaderSize+int(h.Size)]
	if got := crc32.ChecksumIEEE(data); got != h.DataCRC {
		return h, nil, fmt.Errorf("data: %w: computed %#08x, header says %#08x", ErrBadCRC, got, h.DataCRC)
	}
	if h.Type != ImageTypeScript {
		return h, nil, fmt.Errorf("%w: type %d, want %d (script)", ErrNotScript, h.Type, ImageTypeScript)
	}
	if h.Comp != ImageCompNone {
		return h, nil, fmt.Errorf("%w: compression %d; U-Boot runs only uncompressed scripts", ErrNotScript, h.Comp)
	}
	// The length list: big-endian uint32s up to a zero one.
	var lengths []uint32
	off := 0
	for {
		if off+4 > len(data) {
			return h, nil, fmt.Errorf("%w: the list of lengths has no zero end", ErrNotScript)
		}
		n := binary.BigEndian.Uint32(data[off:])
		off += 4
		if n == 0 {
			break
		}
		lengths = append(lengths, n)
	}
	if len(lengths) == 0 {
		return h, nil, fmt.Errorf("%w: empty script", ErrNotScript)
	}
	if uint64(lengths[0]) > uint64(len(data)-off) {
		return h, nil, fmt.Errorf("%w: script length %d, %d bytes follow", ErrNotScript, lengths[0], len(data)-off)
	}
	return h, data[off : off+int(lengths[0])], nil
}
