package images

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"strconv"
	"time"
)

// genBlock is the unit the generator fills, writes and hashes; a multiple
// of 32 so every block but the last is whole PRNG rounds.
const genBlock = 4 << 20

// genLanes is pxeperf's test-image generator, version 1: four xorshift64
// (13, 7, 17) lanes seeded from sha256("pxeperf-generate-v1\x00" + name +
// "\x00" + decimal seed), each round advancing all four and writing them
// little-endian (32 bytes). It is not cryptographic; it is fast, defined
// here in full, and so gives the same bytes on any machine.
type genLanes [4]uint64

func newGenLanes(name string, seed uint64) *genLanes {
	k := sha256.Sum256([]byte("pxeperf-generate-v1\x00" + name + "\x00" + strconv.FormatUint(seed, 10)))
	var g genLanes
	for i := range g {
		g[i] = binary.LittleEndian.Uint64(k[8*i:])
		if g[i] == 0 {
			g[i] = 0x9e3779b97f4a7c15 // xorshift must not start at zero
		}
	}
	return &g
}

// fill writes len(p) bytes; len(p) must be a multiple of 32 except for the
// stream's last call.
func (g *genLanes) fill(p []byte) {
	a, b, c, d := g[0], g[1], g[2], g[3]
	i := 0
	for ; i+32 <= len(p); i += 32 {
		a, b, c, d = xorshift(a), xorshift(b), xorshift(c), xorshift(d)
		q := p[i : i+32 : i+32]
		binary.LittleEndian.PutUint64(q[0:], a)
		binary.LittleEndian.PutUint64(q[8:], b)
		binary.LittleEndian.PutUint64(q[16:], c)
		binary.LittleEndian.PutUint64(q[24:], d)
	}
	g[0], g[1], g[2], g[3] = a, b, c, d
	if i < len(p) {
		var tail [32]byte
		g.fill(tail[:])
		copy(p[i:], tail[:])
	}
}

// xorshift is one step of a lane: xorshift64 with shifts (13, 7, 17).
func xorshift(x uint64) uint64 {
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	return x
}

// Generate writes size deterministic pseudo-random bytes for name and seed
// to w and returns their hex sha256: the same name, size and seed give the
// same bytes on any machine, and a shorter image is a prefix of a longer
// one. Generating and hashing overlap on two goroutines: hashing is the
// bound (see images/DESIGN.md#generating-test-images).
func Generate(w io.Writer, name string, size int64, seed uint64) (string, error) {
	if size < 0 {
		return "", fmt.Errorf("size %d is negative", size)
	}
	g := newGenLanes(name, seed)
	free := make(chan []byte, 3)
	for range cap(free) {
		free <- make([]byte, genBlock)
	}
	work := make(chan []byte, cap(free))
	done := make(chan hash.Hash, 1)
	go func() {
		h := sha256.New()
		for b := range work {
			h.Write(b)
			free <- b[:cap(b)]
		}
		done <- h
	}()
	var werr error
	for left := size; left > 0 && werr == nil; {
		b := <-free
		n := int64(len(b))
		if left < n {
			b = b[:left]
			n = left
		}
		g.fill(b)
		if _, werr = w.Write(b); werr == nil {
			work <- b
			left -= n
		}
	}
	close(work)
	h := <-done
	if werr != nil {
		return "", werr
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// GenerateFile writes a generated image to root/name (temp file, then
// rename) and its sidecar root/name.sha256 in sha256sum's format, and
// returns the digest.
func GenerateFile(rootDir, name string, size int64, seed uint64) (string, error) {
	n, err := Clean(name)
	if err != nil {
		return "", fmt.Errorf("image name %q: %w", name, err)
	}
	if err := os.MkdirAll(rootDir, 0o755); err != nil {
		return "", fmt.Errorf("creating image root %s: %w", rootDir, err)
	}
	r, err := os.OpenRoot(rootDir)
	if err != nil {
		return "", fmt.Errorf("opening image root %s: %w", rootDir, err)
	}
	defer r.Close()
	if d := path.Dir(n); d != "." {
		if err := r.MkdirAll(d, 0o755); err != nil {
			return "", fmt.Errorf("creating %s in %s: %w", d, rootDir, rootErr(d, err))
		}
	}
	tmpName := fmt.Sprintf("%s.tmp%d", n, time.Now().UnixNano())
	f, err := r.OpenFile(tmpName, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return "", fmt.Errorf("creating %s in %s: %w", n, rootDir, rootErr(n, err))
	}
	sum, err := Generate(f, n, size, seed)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Rename(tmpName, n)
	}
	if err != nil {
		r.Remove(tmpName)
		return "", fmt.Errorf("writing %s in %s: %w", n, rootDir, err)
	}
	line := sum + "  " + path.Base(n) + "\n"
	if err := r.WriteFile(n+".sha256", []byte(line), 0o644); err != nil {
		return "", fmt.Errorf("writing %s.sha256: %w", n, err)
	}
	return sum, nil
}
