package images

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

// Entry is one row of the inventory `pxeperf images list` prints.
type Entry struct {
	Name   string // root-relative name a client asks for
	Kind   string // "file", "compressed" (the .zst/.gz itself), "unpacked" (served decompressed), "fallback"
	From   string // for "unpacked" the compressed file, for "fallback" its path
	Size   int64
	SHA256 string
	Err    error // set when the file could not be read or decompressed
}

// codecFor returns the codec for a compressed file name.
func codecFor(name string) (codec, bool) {
	for _, c := range codecs {
		if strings.HasSuffix(name, c.ext) && len(name) > len(c.ext) {
			return c, true
		}
	}
	return codec{}, false
}

// hashFile returns size and hex sha256 of root-relative n as stored.
func (s *Store) hashFile(n string) (int64, string, error) {
	f, _, err := openRegular(s.root, n)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	return hashStream(f)
}

// hashUnpacked returns size and hex sha256 of compressed src decompressed,
// streaming: nothing is written to disk.
func (s *Store) hashUnpacked(src string, c codec) (int64, string, error) {
	f, _, err := openRegular(s.root, src)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	dec, err := c.open(f)
	if err != nil {
		return 0, "", fmt.Errorf("%s: %w: %v", src, ErrCorrupt, err)
	}
	defer dec.Close()
	lr := &io.LimitedReader{R: dec, N: s.maxUnpacked + 1}
	size, sum, err := hashStream(lr)
	if err != nil {
		return 0, "", fmt.Errorf("%s: %w: %v", src, ErrCorrupt, err)
	}
	if size > s.maxUnpacked {
		return 0, "", fmt.Errorf("%s: %w (%d bytes)", src, ErrTooLarge, s.maxUnpacked)
	}
	return size, sum, nil
}

func hashStream(r io.Reader) (int64, string, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return n, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// hashServed hashes what Open would serve for n, except that compressed
// images are decompressed on the fly instead of through the cache. from is
// the compressed source or the fallback path, "" for a plain file.
func (s *Store) hashServed(n string) (size int64, sum, from string, err error) {
	size, sum, err = s.hashFile(n)
	if !errors.Is(err, errMissing) {
		return size, sum, "", err
	}
	for _, c := range codecs {
		if _, serr := s.root.Stat(n + c.ext); serr == nil {
			size, sum, err = s.hashUnpacked(n+c.ext, c)
			return size, sum, n + c.ext, err
		}
	}
	if p := s.FallbackPath(n); p != "" {
		f, _, err := openRegular(hostFS{}, p)
		if err != nil {
			return 0, "", p, err
		}
		defer f.Close()
		size, sum, err = hashStream(f)
		return size, sum, p, err
	}
	return 0, "", "", fmt.Errorf("%s: not in %s (nor %s.zst or %s.gz): %w", n, s.dir, n, n, fs.ErrNotExist)
}

// walk calls fn for every regular file (following symlinks that stay in the
// root) other than .sha256 sidecars and temp files, in lexical order.
func (s *Store) walk(fn func(n string, err error)) error {
	return fs.WalkDir(s.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			fn(p, err)
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			st, err := s.root.Stat(p)
			if err != nil {
				fn(p, rootErr(p, err))
				return nil
			}
			if !st.Mode().IsRegular() {
				return nil
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		fn(p, nil)
		return nil
	})
}

// List returns every file the store serves, hashed: plain files, each
// compressed file and (when no plain file shadows it) the image it unpacks
// to, and the iPXE binaries the fallback folder supplies. Sidecars
// (.sha256) are left out. Reading every byte, it takes as long as the root
// is large.
func (s *Store) List() ([]Entry, error) {
	var names []string
	var out []Entry
	err := s.walk(func(n string, err error) {
		if err != nil {
			out = append(out, Entry{Name: n, Kind: "file", Err: err})
			return
		}
		if !strings.HasSuffix(n, ".sha256") {
			names = append(names, n)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", s.dir, err)
	}
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	for _, n := range names {
		kind := "file"
		c, compressed := codecFor(n)
		if compressed {
			kind = "compressed"
		}
		e := Entry{Name: n, Kind: kind}
		e.Size, e.SHA256, e.Err = s.hashFile(n)
		out = append(out, e)
		if !compressed {
			continue
		}
		base := strings.TrimSuffix(n, c.ext)
		if have[base] || (c.ext == ".gz" && have[base+".zst"]) {
			continue // Open serves the plain file or the .zst instead
		}
		u := Entry{Name: base, Kind: "unpacked", From: n}
		u.Size, u.SHA256, u.Err = s.hashUnpacked(n, c)
		out = append(out, u)
	}
	for _, b := range IPXEBinaries {
		if have[b] || have[b+".zst"] || have[b+".gz"] {
			continue
		}
		if p := s.FallbackPath(b); p != "" {
			_, sum, from, err := s.hashServed(b)
			st, _ := os.Stat(p)
			e := Entry{Name: b, Kind: "fallback", From: from, SHA256: sum, Err: err}
			if st != nil {
				e.Size = st.Size()
			}
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ParseSidecar reads a .sha256 file: sha256sum's "HEX  NAME" (or
// "HEX *NAME"), BSD's "SHA256 (NAME) = HEX", or the bare digest; only the
// first line counts.
func ParseSidecar(b []byte) (string, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	l := strings.TrimSpace(string(line))
	if strings.HasPrefix(l, "SHA256 (") {
		if i := strings.LastIndex(l, "= "); i >= 0 {
			l = l[i+2:]
		}
	}
	f := strings.Fields(l)
	if len(f) == 0 {
		return "", errors.New("empty sidecar: expected a sha256 hex digest (sha256sum FILE > FILE.sha256)")
	}
	d := strings.ToLower(f[0])
	if _, err := hex.DecodeString(d); err != nil || len(d) != 64 {
		return "", fmt.Errorf("sidecar starts with %.70q, not a sha256 hex digest (64 hex digits); rewrite it with sha256sum FILE > FILE.sha256", f[0])
	}
	return d, nil
}

// Check is the result of verifying one image against its sidecar.
type Check struct {
	Name    string // image checked, root-relative
	Sidecar string // the .sha256 file it was checked against
	From    string // compressed file that was decompressed for the check, if any
	Want    string
	Got     string
	Size    int64
	Err     error // nil when the digests match
}

// ErrMismatch is a Check's error when the digest differs from the sidecar.
var ErrMismatch = errors.New("sha256 does not match the sidecar")

// Verify checks images against their .sha256 sidecars. With no names it
// checks every sidecar in the root (NAME.sha256 checks NAME, decompressing
// NAME.zst or NAME.gz when only those exist). A name given is checked
// against NAME.sha256, or for NAME.zst / NAME.gz without its own sidecar,
// decompressed against the plain name's sidecar.
func (s *Store) Verify(names ...string) ([]Check, error) {
	if len(names) == 0 {
		var sidecars []string
		if err := s.walk(func(n string, err error) {
			if err == nil && strings.HasSuffix(n, ".sha256") && len(n) > len(".sha256") {
				sidecars = append(sidecars, n)
			}
		}); err != nil {
			return nil, fmt.Errorf("walking %s: %w", s.dir, err)
		}
		out := make([]Check, 0, len(sidecars))
		for _, sc := range sidecars {
			out = append(out, s.check(strings.TrimSuffix(sc, ".sha256"), sc, ""))
		}
		return out, nil
	}
	out := make([]Check, 0, len(names))
	for _, name := range names {
		n, err := Clean(name)
		if err != nil {
			out = append(out, Check{Name: name, Err: err})
			continue
		}
		if _, err := s.root.Stat(n + ".sha256"); err == nil {
			out = append(out, s.check(n, n+".sha256", ""))
			continue
		}
		if c, ok := codecFor(n); ok {
			base := strings.TrimSuffix(n, c.ext)
			if _, err := s.root.Stat(base + ".sha256"); err == nil {
				out = append(out, s.check(base, base+".sha256", n))
				continue
			}
		}
		out = append(out, Check{Name: n, Err: fmt.Errorf("no sidecar %s.sha256 (write one with sha256sum or `pxeperf images generate`): %w", path.Base(n), fs.ErrNotExist)})
	}
	return out, nil
}

// check verifies n against sidecar sc; from, when set, is the compressed
// file to decompress instead of what Open would serve.
func (s *Store) check(n, sc, from string) Check {
	ch := Check{Name: n, Sidecar: sc, From: from}
	b, err := s.root.ReadFile(sc)
	if err != nil {
		ch.Err = rootErr(sc, err)
		return ch
	}
	if ch.Want, err = ParseSidecar(b); err != nil {
		ch.Err = fmt.Errorf("%s: %w", sc, err)
		return ch
	}
	if from != "" {
		c, _ := codecFor(from)
		ch.Size, ch.Got, err = s.hashUnpacked(from, c)
	} else {
		ch.Size, ch.Got, ch.From, err = s.hashServed(n)
	}
	switch {
	case err != nil:
		ch.Err = err
	case ch.Got != ch.Want:
		ch.Err = ErrMismatch
	}
	return ch
}
