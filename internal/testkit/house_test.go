package testkit

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The house rules of issue 30, checked over the whole module's non-test Go
// files. A function a reader cannot hold in the head hides its steps, and a
// measured figure in a comment goes stale as the code changes: history
// belongs in the package's DESIGN.md, the comment gives the rule.

// maxFuncLines is the longest non-test function the tree may hold.
const maxFuncLines = 100

// maxArchitectureLines keeps docs/ARCHITECTURE.md to about two screens.
const maxArchitectureLines = 150

// measured matches what only a measurement writes: a ratio (0.76x), a
// count of rounds or runs, a before -> after pair, a benchmark's units, or
// a profile's share. A rule's constant (a 1 Gbit/s tbf, a 200 ms timer) is
// not one of them.
var measured = regexp.MustCompile(strings.Join([]string{
	`\b\d+(\.\d+)?x\b`,      // a ratio: 0.76x
	`\b\d+ (rounds|runs)\b`, // a run count
	`\d[\d.,]* ?(->|→) ?\d`, // before -> after
	`\b(ns|B|allocs)/op\b`,  // go test -bench units
	`\bperf: `,              // a profile
	`\d+(\.\d+)?% (of (the |its |a )?(CPU|time|calls)|behind|more|fewer)`, // a measured share
	`\bsame[- ]run\b`, // an A/B account
	`\d+(\.\d+)?-\d+(\.\d+)? ?(ms|µs|us) (on|seen)\b`, // a range observed
	`\b(cost|costs|took) (about |~)\d`,                // a measured cost
	`~\d+(\.\d+)? ?(ms|µs|us) of CPU`,
}, "|"))

// moduleRoot is the folder of go.mod, two up from this file's package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod two folders up from internal/testkit: %v", err)
	}
	return root
}

// sources lists the module's non-test Go files, relative to root.
func sources(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "dist") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			rel, _ := filepath.Rel(root, p)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestHouseFunctionLength(t *testing.T) {
	root := moduleRoot(t)
	for _, rel := range sources(t, root) {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, 0)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			start, end := fset.Position(fd.Pos()).Line, fset.Position(fd.End()).Line
			if n := end - start + 1; n > maxFuncLines {
				t.Errorf("%s:%d: %s is %d lines (at most %d): split it into named steps", rel, start, fd.Name.Name, n, maxFuncLines)
			}
		}
	}
}

func TestHouseNoMeasuredFiguresInComments(t *testing.T) {
	root := moduleRoot(t)
	for _, rel := range sources(t, root) {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.ParseComments)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		for _, g := range f.Comments {
			for _, c := range g.List {
				sc := bufio.NewScanner(strings.NewReader(c.Text))
				line := fset.Position(c.Pos()).Line
				for sc.Scan() {
					if m := measured.FindString(sc.Text()); m != "" {
						t.Errorf("%s:%d: measured figure %q in a comment: move the history to the package's DESIGN.md and link it", rel, line, m)
					}
					line++
				}
			}
		}
	}
}

func TestHouseArchitectureFits(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxArchitectureLines {
		t.Errorf("docs/ARCHITECTURE.md is %d lines (at most %d): keep the data flow, who owns what and the contracts; move the rest to the packages' DESIGN.md", n, maxArchitectureLines)
	}
}

// TestHouseMeasuredPattern keeps the pattern honest both ways.
func TestHouseMeasuredPattern(t *testing.T) {
	for _, s := range []string{"measured 1.08x the Gbit/s", "(31 rounds, 1 GiB)", "sendfile 6735 -> 1523 calls", "12 ns/op", "perf: sysmon 17%", "none in 100 runs", "(same run: up to 10 spurious timeouts", "answers at once (0.1-0.6 ms on veth)", "cost about 28 us", "left 0.5% behind"} {
		if !measured.MatchString(s) {
			t.Errorf("%q not flagged", s)
		}
	}
	for _, s := range []string{"a 1 Gbit/s tbf on the server's end", "waits 200 ms", "0x40", "2 x the asked delay", "1470-byte datagrams at 1 Mbit/s"} {
		if measured.MatchString(s) {
			t.Errorf("%q flagged: %q", s, measured.FindString(s))
		}
	}
}
