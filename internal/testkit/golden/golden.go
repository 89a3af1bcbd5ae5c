// Package golden compares what a test produced with a golden file under
// testdata/, or rewrites the file when the test binary runs with -update:
// the one copy of what bootcfg's templates, report's tables and the CLI's
// report output are checked against.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// Check fails the test with a diff unless got is the content of the file
// at path, naming the command that rewrites it. With -update it writes got
// there first (and the folder), so the test passes and the diff shows in
// git.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	top, _, _ := strings.Cut(t.Name(), "/")
	rewrite := "go test -run '^" + top + "$' -update rewrites it"
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (%s)", err, rewrite)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got; %s):\n%s", path, rewrite, diff)
	}
}
