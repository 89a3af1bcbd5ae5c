package configs

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestImagesDefaults(t *testing.T) {
	got := Default().Images
	want := Images{CacheMaxBytes: 256 << 30, MinFreeBytes: 1 << 30, MaxUnpackedBytes: 64 << 30}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("default images section (-want +got):\n%s", diff)
	}
}

func TestImagesKeys(t *testing.T) {
	tests := map[string]struct {
		yaml string
		want Images // when no error
		err  []string
	}{
		"units": {yaml: "images:\n  cache_max_bytes: 20GB\n  min_free_bytes: 512MiB\n  max_unpacked_bytes: 8589934592\n",
			want: Images{CacheMaxBytes: 20e9, MinFreeBytes: 512 << 20, MaxUnpackedBytes: 8 << 30}},
		"no minimum":       {yaml: "images:\n  min_free_bytes: 0\n", want: Images{CacheMaxBytes: 256 << 30, MaxUnpackedBytes: 64 << 30}},
		"not a size":       {yaml: "images:\n  cache_max_bytes: lots\n", err: []string{"t.yaml:2", `"lots" is not a size`, "64GiB"}},
		"unknown unit":     {yaml: "images:\n  cache_max_bytes: 5PB\n", err: []string{"t.yaml:2", "is not a size"}},
		"too large":        {yaml: "images:\n  cache_max_bytes: 9000000TiB\n", err: []string{"t.yaml:2", "too large"}},
		"tiny cap":         {yaml: "images:\n  cache_max_bytes: 1KiB\n", err: []string{"t.yaml:2", "images.cache_max_bytes", "too small"}},
		"negative minimum": {yaml: "images:\n  min_free_bytes: -1GiB\n", err: []string{"t.yaml:2", "images.min_free_bytes", "negative"}},
		"cap below one image": {yaml: "images:\n  cache_max_bytes: 10GiB\n", err: []string{"t.yaml:2", "images.cache_max_bytes",
			"10GiB is less than images.max_unpacked_bytes (64GiB)", "raise the cap or lower max_unpacked_bytes"}},
		"misspelt key": {yaml: "images:\n  min_free_byte: 1GiB\n", err: []string{"t.yaml:2", `did you mean "min_free_bytes"`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := Parse("t.yaml", []byte(tc.yaml), Default())
			if tc.err == nil {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, c.Images); diff != "" {
					t.Errorf("images (-want +got):\n%s", diff)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.err)
			}
			msg, at := err.Error(), 0
			for _, w := range tc.err {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Fatalf("error %q lacks %q (in order)", msg, w)
				}
				at += i
			}
		})
	}
}

func TestByteSizeRoundTrip(t *testing.T) {
	for _, s := range []string{"0", "1", "1023", "1KiB", "64GiB", "3TiB", "1000001"} {
		b, err := ParseByteSize(s)
		if err != nil {
			t.Fatalf("ParseByteSize(%q): %v", s, err)
		}
		if b.String() != s {
			t.Errorf("ParseByteSize(%q).String() = %q", s, b.String())
		}
	}
}

// FuzzParseByteSize: sizes come from the config file; any text gives a
// size that prints back to itself or an error, never a panic or overflow.
func FuzzParseByteSize(f *testing.F) {
	for _, s := range []string{"0", "64GiB", "500MB", "1kB", " 7 TiB ", "-1", "+5", "9223372036854775807", "8589934592GiB", "GiB", "1.5GiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseByteSize(s)
		if err != nil {
			return
		}
		back, err := ParseByteSize(b.String())
		if err != nil || back != b {
			t.Fatalf("ParseByteSize(%q) = %d, printed %q, parsed back %d, %v", s, b, b.String(), back, err)
		}
	})
}
