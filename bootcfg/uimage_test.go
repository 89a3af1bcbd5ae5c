package bootcfg

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// knownImage is what `SOURCE_DATE_EPOCH=1700000000 mkimage -A arm -O linux
// -T script -C none -n 'pxeperf test' -d s.txt` (u-boot-tools 2023.01)
// writes for s.txt = "echo hi\n".
const knownImage = "27051956398dd8306553f10000000010000000000000000" +
	"0d934016205020600" + "7078657065726620746573740000000000000000000000000000000000000000" +
	"0000000800000000" + "6563686f2068690a"

func TestScriptImageKnown(t *testing.T) {
	want, err := hex.DecodeString(knownImage)
	if err != nil {
		t.Fatal(err)
	}
	got := ScriptImage([]byte("echo hi\n"), "pxeperf test", time.Unix(1700000000, 0))
	if !bytes.Equal(got, want) {
		t.Fatalf("ScriptImage:\n got %x\nwant %x", got, want)
	}
	h, script, err := ParseScriptImage(got)
	if err != nil {
		t.Fatal(err)
	}
	wantH := ImageHeader{
		Magic: 0x27051956, HeaderCRC: 0x398dd830, Time: 1700000000, Size: 16, DataCRC: 0xd9340162,
		OS: 5, Arch: 2, Type: 6, Comp: 0, Name: "pxeperf test",
	}
	if diff := cmp.Diff(wantH, h); diff != "" {
		t.Errorf("header (-want +got):\n%s", diff)
	}
	if string(script) != "echo hi\n" {
		t.Errorf("script = %q", script)
	}
}

func TestScriptImageName(t *testing.T) {
	long := strings.Repeat("n", 40)
	h, _, err := ParseScriptImage(ScriptImage([]byte("echo\n"), long, time.Unix(0, 0)))
	if err != nil {
		t.Fatal(err)
	}
	if h.Name != long[:32] {
		t.Errorf("name = %q, want the first 32 bytes", h.Name)
	}
}

func TestParseScriptImageRejects(t *testing.T) {
	good := ScriptImage([]byte("echo hi\n"), "x", time.Unix(1, 0))
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x01
		return b
	}
	other := bytes.Clone(good)
	other[30] = 2 // kernel
	withCRC := ScriptImage(nil, "x", time.Unix(1, 0))
	tests := map[string]struct {
		b    []byte
		want error
	}{
		"short":            {good[:10], ErrNotImage},
		"magic":            {flip(0), ErrNotImage},
		"header time":      {flip(9), ErrBadCRC},
		"header name":      {flip(40), ErrBadCRC},
		"header crc":       {flip(5), ErrBadCRC},
		"data length word": {flip(64 + 3), ErrBadCRC},
		"data script":      {flip(len(good) - 2), ErrBadCRC},
		"truncated":        {good[:len(good)-1], ErrNotImage},
		"type":             {fixHeaderCRC(other), ErrNotScript},
		"empty script":     {withCRC, ErrNotScript},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, _, err := ParseScriptImage(tt.b)
			if !errors.Is(err, tt.want) {
				t.Fatalf("ParseScriptImage: %v, want %v", err, tt.want)
			}
		})
	}
}

// fixHeaderCRC recomputes the header CRC after a test changed a field.
func fixHeaderCRC(b []byte) []byte {
	var z [ImageHeaderSize]byte
	copy(z[:], b)
	z[4], z[5], z[6], z[7] = 0, 0, 0, 0
	c := crc32.ChecksumIEEE(z[:])
	b[4], b[5], b[6], b[7] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
	return b
}

func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("needs %s from u-boot-tools (apt-get install u-boot-tools)", name)
	}
	return p
}

// mkimage itself must accept our image, and our image must be the bytes
// mkimage makes from the same script.
func TestScriptImageMkimage(t *testing.T) {
	mkimage := needTool(t, "mkimage")
	dir := t.TempDir()
	script := []byte("echo 'pxeperf: test'\nsetenv bootargs 'a b'\n")
	mtime := time.Unix(1764000000, 0)
	ours := filepath.Join(dir, "ours.uimg")
	if err := os.WriteFile(ours, ScriptImage(script, "pxeperf board1", mtime), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(mkimage, "-l", ours).CombinedOutput()
	if err != nil {
		t.Fatalf("mkimage -l: %v\n%s", err, out)
	}
	for _, want := range []string{"Image Name:   pxeperf board1", "Script", "ARM Linux", fmt.Sprintf("Image 0: %d Bytes", len(script))} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("mkimage -l does not print %q:\n%s", want, out)
		}
	}

	src := filepath.Join(dir, "s.txt")
	if err := os.WriteFile(src, script, 0o644); err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(dir, "theirs.uimg")
	cmd := exec.Command(mkimage, "-A", "arm", "-O", "linux", "-T", "script", "-C", "none", "-n", "pxeperf board1", "-d", src, theirs)
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=1764000000")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mkimage: %v\n%s", err, out)
	}
	tb, err := os.ReadFile(theirs)
	if err != nil {
		t.Fatal(err)
	}
	h, got, err := ParseScriptImage(tb)
	if err != nil {
		t.Fatalf("ParseScriptImage(mkimage's image): %v", err)
	}
	if !bytes.Equal(got, script) || h.Name != "pxeperf board1" || h.Time != uint32(mtime.Unix()) {
		t.Errorf("mkimage's image parsed as %+v, %q", h, got)
	}
	if ob, _ := os.ReadFile(ours); !bytes.Equal(ob, tb) {
		t.Errorf("ScriptImage differs from mkimage's image:\n ours %x\n mkimage %x", ob, tb)
	}

	// dumpimage 2023.01 extracts a script image's whole data part: the
	// length list and the script.
	if dumpimage, err := exec.LookPath("dumpimage"); err == nil {
		outFile := filepath.Join(dir, "script.out")
		if out, err := exec.Command(dumpimage, "-T", "script", "-p", "0", "-o", outFile, ours).CombinedOutput(); err != nil {
			t.Fatalf("dumpimage: %v\n%s", err, out)
		}
		want := append([]byte{0, 0, 0, byte(len(script)), 0, 0, 0, 0}, script...)
		if b, _ := os.ReadFile(outFile); !bytes.Equal(b, want) {
			t.Errorf("dumpimage extracted %q, want %q", b, want)
		}
	}
}
