package peers

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestKnobsListed keeps doc.go's list of knobs whole: every PXEPERF_BENCH*
// name a Go file of the tree mentions is in it.
func TestKnobsListed(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`PXEPERF_BENCH(_[A-Z0-9_]+)?`)
	listed := name.FindAllString(string(doc), -1)
	err = filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != "../.." {
			if err == nil {
				err = filepath.SkipDir
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, k := range name.FindAllString(string(b), -1) {
			if !slices.Contains(listed, k) {
				t.Errorf("%s: %s is not in bench/peers/doc.go's list of knobs", path, k)
				listed = append(listed, k) // once per name
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
