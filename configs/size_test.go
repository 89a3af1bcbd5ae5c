package configs

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseSize: the forms every caller of the one size parser took before
// it was one (images generate --size and the bench, the config file, report
// --min-size and the API's min_size) read as they did, and each error says
// what is wrong and names the accepted forms.
func TestParseSize(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    int64
		wantErr string // in the error, before the forms
	}{
		"bytes":          {in: "1000000", want: 1000000},
		"zero":           {in: "0", want: 0},
		"B":              {in: "512B", want: 512},
		"lower b":        {in: "10b", want: 10},
		"MiB":            {in: "500MiB", want: 500 << 20},
		"GiB":            {in: "1GiB", want: 1 << 30},
		"TiB":            {in: "1TiB", want: 1 << 40},
		"bare K binary":  {in: "64K", want: 64 << 10},
		"bare M binary":  {in: "64M", want: 64 << 20},
		"bare G binary":  {in: "1G", want: 1 << 30},
		"lower k":        {in: "4k", want: 4096},
		"upper KIB":      {in: "1KIB", want: 1 << 10},
		"lowercase gib":  {in: "1gib", want: 1 << 30},
		"KB decimal":     {in: "1KB", want: 1000},
		"kB decimal":     {in: "1kB", want: 1000},
		"MB decimal":     {in: "500MB", want: 500e6},
		"GB decimal":     {in: "20GB", want: 20e9},
		"TB decimal":     {in: "2TB", want: 2e12},
		"space":          {in: " 2 MiB ", want: 2 << 20},
		"space before K": {in: "64 K", want: 64 << 10},
		"fraction":       {in: "1.5GiB", want: 3 << 29},
		"half G":         {in: "0.5G", want: 512 << 20},
		"rounded":        {in: "0.3", want: 0},
		"largest":        {in: "8388607TiB", want: 8388607 << 40},
		"largest bytes":  {in: "9223372036854775807", want: 1<<63 - 1},
		"empty":          {in: "", wantErr: `"" is not a size`},
		"unit only":      {in: "MiB", wantErr: `"MiB" is not a size`},
		"unknown unit":   {in: "5 parsecs", wantErr: "is not a size"},
		"peta":           {in: "5PB", wantErr: "is not a size"},
		"bits":           {in: "5Mbit", wantErr: "is not a size"},
		"two dots":       {in: "1.2.3M", wantErr: "is not a size"},
		"dot":            {in: ".", wantErr: "is not a size"},
		"exponent":       {in: "1e9", wantErr: "is not a size"},
		"plus":           {in: "+5", wantErr: "is not a size"},
		"inf":            {in: "inf", wantErr: "is not a size"},
		"negative":       {in: "-1", wantErr: `"-1" is negative`},
		"negative unit":  {in: "-4K", wantErr: "is negative"},
		"overflow":       {in: "99999999999TiB", wantErr: "is too large (the most is 8EiB)"},
		"overflow bytes": {in: "99999999999999999999", wantErr: "is too large (the most is 8EiB)"},
		"overflow frac":  {in: "8388608.5TiB", wantErr: "is too large (the most is 8EiB)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseSize(tc.in)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseSize(%q) = %d, want an error", tc.in, got)
				}
				if msg := err.Error(); !strings.Contains(msg, tc.wantErr+": "+sizeForms) {
					t.Errorf("ParseSize(%q) error %q, want %q and the forms", tc.in, msg, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSize(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseSize(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// TestParseByteSizeNegative: the config file's sizes read a minus too, so
// Validate can refuse a negative size by its key (TestImagesKeys).
func TestParseByteSizeNegative(t *testing.T) {
	for in, want := range map[string]ByteSize{"-1GiB": -1 << 30, "-1.5K": -1536, " -7 TiB ": -7 << 40, "-0": 0} {
		got, err := ParseByteSize(in)
		if err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"--1", "- 1", "-", "-+1", "-99999999999TiB"} {
		if got, err := ParseByteSize(in); err == nil {
			t.Errorf("ParseByteSize(%q) = %d, want an error", in, got)
		}
	}
}

// FuzzParseSize: sizes come from flags, queries and the config file; any
// text gives a size or an error, never a panic; ParseSize is never
// negative and otherwise agrees with the config's ParseByteSize.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"1", "500MiB", "1.5G", "64M", "", ".", "1e9", "9999999999999TiB", "-4K", "64 K", "1KB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		b, berr := ParseByteSize(s)
		switch {
		case err == nil && n < 0:
			t.Fatalf("ParseSize(%q) = %d, negative", s, n)
		case err == nil && (berr != nil || int64(b) != n):
			t.Fatalf("ParseSize(%q) = %d but ParseByteSize = %d, %v", s, n, b, berr)
		case err != nil && berr == nil && b >= 0:
			t.Fatalf("ParseSize(%q): %v but ParseByteSize = %d", s, err, b)
		}
	})
}
