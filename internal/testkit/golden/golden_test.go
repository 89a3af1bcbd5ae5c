package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what Errorf and Fatalf say.
type recorder struct {
	testing.TB
	errs  []string
	fatal bool
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, a ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, a...))
}
func (r *recorder) Fatalf(format string, a ...any) {
	r.errs, r.fatal = append(r.errs, fmt.Sprintf(format, a...)), true
	runtime.Goexit()
}
func (r *recorder) Fatal(a ...any) { r.Fatalf("%s", fmt.Sprint(a...)) }

// check runs Check as the test r would, in a goroutine of its own so a
// Fatalf ends only it.
func check(r *recorder, path string, got []byte) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		Check(r, path, got)
	}()
	<-done
}

// TestCheck: the same content passes; other content fails with a diff, a
// missing file fails at once, both naming -update; with -update the file
// (and its folder) is written and the check passes.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "testdata", "t.golden")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("a\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		path      string
		got       string
		wantErr   string // in the one error; "" none
		wantFatal bool
	}{
		"same":      {path, "a\nb\n", "", false},
		"differs":   {path, "a\nc\n", "(-want +got", false},
		"no file":   {filepath.Join(dir, "nope.golden"), "x", "no such file", true},
		"no folder": {filepath.Join(dir, "no", "t.golden"), "x", "no such file", true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := &recorder{TB: t}
			check(r, tc.path, []byte(tc.got))
			switch {
			case tc.wantErr == "" && len(r.errs) > 0:
				t.Errorf("errors %q, want none", r.errs)
			case tc.wantErr != "" && (len(r.errs) != 1 || !strings.Contains(r.errs[0], tc.wantErr) ||
				!strings.Contains(r.errs[0], "go test -run '^TestCheck$' -update rewrites it")):
				t.Errorf("errors %q, want one with %q and how to rewrite", r.errs, tc.wantErr)
			case r.fatal != tc.wantFatal:
				t.Errorf("fatal %v, want %v", r.fatal, tc.wantFatal)
			}
		})
	}

	*update = true
	defer func() { *update = false }()
	for _, p := range []string{path, filepath.Join(dir, "new", "folder", "t.golden")} {
		r := &recorder{TB: t}
		check(r, p, []byte("rewritten\n"))
		if b, err := os.ReadFile(p); len(r.errs) > 0 || err != nil || string(b) != "rewritten\n" {
			t.Errorf("-update on %s: errors %q, file %q, %v", p, r.errs, b, err)
		}
	}
}
