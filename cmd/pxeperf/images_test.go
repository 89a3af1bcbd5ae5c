package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runImagesCmd runs `pxeperf images ARGS...` in-process.
func runImagesCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return runCmd(t, append([]string{"images"}, args...)...)
}

func TestImagesCommands(t *testing.T) {
	root := filepath.Join(t.TempDir(), "images")
	out, err := runImagesCmd(t, "generate", "test.img", "--size", "1MiB", "--seed", "3", "--root", root)
	if err != nil {
		t.Fatalf("generate: %v\n%s", err, out)
	}
	side, err := os.ReadFile(filepath.Join(root, "test.img.sha256"))
	if err != nil {
		t.Fatal(err)
	}
	sum := strings.Fields(string(side))[0]
	if !strings.HasPrefix(out, sum) {
		t.Errorf("generate printed %q, want it to start with the sha256 %s", out, sum)
	}
	st, err := os.Stat(filepath.Join(root, "test.img"))
	if err != nil || st.Size() != 1<<20 {
		t.Fatalf("generated file: %v, %v", st, err)
	}

	out, err = runImagesCmd(t, "list", "--root", root)
	if err != nil || !strings.Contains(out, "test.img") || !strings.Contains(out, sum) || !strings.Contains(out, "1048576") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	if out, err = runImagesCmd(t, "verify", "--root", root); err != nil || !strings.Contains(out, "OK    test.img") {
		t.Fatalf("verify on a good image: %v\n%s", err, out)
	}

	f, err := os.OpenFile(filepath.Join(root, "test.img"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xff, 0x00, 0xff}, 4096)
	f.Close()
	out, err = runImagesCmd(t, "verify", "test.img", "--root", root)
	if err == nil || !strings.Contains(err.Error(), "test.img") || !strings.Contains(out, "BAD   test.img") {
		t.Fatalf("verify on a changed image: err %v\n%s", err, out)
	}

	for name, args := range map[string][]string{
		"bad size":     {"generate", "x.img", "--size", "12 apples", "--root", root},
		"no size":      {"generate", "x.img", "--root", root},
		"escape":       {"generate", "../x.img", "--size", "1", "--root", root},
		"no sidecars":  {"verify", "--root", t.TempDir()},
		"missing root": {"list", "--root", filepath.Join(root, "nope")},
	} {
		if out, err := runImagesCmd(t, args...); err == nil {
			t.Errorf("%s: no error\n%s", name, out)
		}
	}
	if _, err := runImagesCmd(t, "generate", "x.img", "--size", "12 apples", "--root", root); err == nil || !strings.Contains(err.Error(), "500MiB") {
		t.Errorf("bad --size error %v does not name the accepted forms", err)
	}
}
