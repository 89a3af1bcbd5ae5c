package images

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func hexSum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func TestList(t *testing.T) {
	fb := t.TempDir()
	writeFile(t, filepath.Join(fb, "undionly.kpxe"), []byte("debian undionly"))
	writeFile(t, filepath.Join(fb, "ipxe.efi"), []byte("debian ipxe.efi"))
	root := t.TempDir()
	plain := []byte("kernel bytes")
	unz := testData(t, 100000, 3)
	zst := compress(t, ".zst", unz)
	gz := compress(t, ".gz", []byte("shadowed"))
	writeFile(t, filepath.Join(root, "boot", "vmlinuz"), plain)
	writeFile(t, filepath.Join(root, "boot", "vmlinuz.sha256"), []byte(hexSum(plain)+"  vmlinuz\n"))
	writeFile(t, filepath.Join(root, "rootfs.zst"), zst)
	writeFile(t, filepath.Join(root, "rootfs.gz"), gz) // .zst wins: no second "rootfs" row
	writeFile(t, filepath.Join(root, "ipxe.efi"), []byte("own ipxe"))
	writeFile(t, filepath.Join(root, "bad.gz"), []byte("not gzip"))
	if err := os.Symlink("/etc/hostname", filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, root, "", nil, WithFallbackDir(fb))
	got, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{Name: "bad", Kind: "unpacked", From: "bad.gz", Err: ErrCorrupt},
		{Name: "bad.gz", Kind: "compressed", Size: 8, SHA256: hexSum([]byte("not gzip"))},
		{Name: "boot/vmlinuz", Kind: "file", Size: int64(len(plain)), SHA256: hexSum(plain)},
		{Name: "escape", Kind: "file", Err: ErrOutsideRoot},
		{Name: "ipxe.efi", Kind: "file", Size: 8, SHA256: hexSum([]byte("own ipxe"))},
		{Name: "rootfs", Kind: "unpacked", From: "rootfs.zst", Size: int64(len(unz)), SHA256: hexSum(unz)},
		{Name: "rootfs.gz", Kind: "compressed", Size: int64(len(gz)), SHA256: hexSum(gz)},
		{Name: "rootfs.zst", Kind: "compressed", Size: int64(len(zst)), SHA256: hexSum(zst)},
		{Name: "undionly.kpxe", Kind: "fallback", From: filepath.Join(fb, "undionly.kpxe"), Size: 15, SHA256: hexSum([]byte("debian undionly"))},
	}
	errIs := cmp.Comparer(func(a, b error) bool {
		if a == nil || b == nil {
			return a == b
		}
		return errors.Is(a, b) || errors.Is(b, a)
	})
	if diff := cmp.Diff(want, got, errIs, cmpopts.IgnoreFields(Entry{}, "SHA256", "Size")); diff != "" {
		t.Fatalf("List (-want +got):\n%s", diff)
	}
	for i := range want {
		if want[i].Err == nil && (got[i].Size != want[i].Size || got[i].SHA256 != want[i].SHA256) {
			t.Errorf("%s: size %d sha %s, want %d %s", want[i].Name, got[i].Size, got[i].SHA256, want[i].Size, want[i].SHA256)
		}
	}
}
