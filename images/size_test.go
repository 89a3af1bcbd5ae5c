package images

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseSize(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    int64
		wantErr bool
	}{
		"bytes":           {in: "1000000", want: 1000000},
		"zero":            {in: "0", want: 0},
		"B":               {in: "512B", want: 512},
		"MiB":             {in: "500MiB", want: 500 << 20},
		"GiB":             {in: "1GiB", want: 1 << 30},
		"bare M binary":   {in: "64M", want: 64 << 20},
		"lower k":         {in: "4k", want: 4096},
		"MB decimal":      {in: "500MB", want: 500e6},
		"GB decimal":      {in: "2GB", want: 2e9},
		"TiB":             {in: "1TiB", want: 1 << 40},
		"lowercase":       {in: "1gib", want: 1 << 30},
		"space":           {in: " 2 MiB ", want: 2 << 20},
		"fraction":        {in: "1.5GiB", want: 3 << 29},
		"largest":         {in: "8388607TiB", want: 8388607 << 40},
		"empty":           {in: "", wantErr: true},
		"unit only":       {in: "MiB", wantErr: true},
		"unknown unit":    {in: "5 parsecs", wantErr: true},
		"negative":        {in: "-1", wantErr: true},
		"two dots":        {in: "1.2.3M", wantErr: true},
		"overflow":        {in: "99999999999TiB", wantErr: true},
		"overflow digits": {in: "99999999999999999999", wantErr: true},
		"bits":            {in: "5Mbit", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseSize(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseSize(%q) = %d, want an error", tc.in, got)
				}
				if !strings.Contains(err.Error(), "500MiB") {
					t.Errorf("error %q does not name the accepted forms", err)
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

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"1", "500MiB", "1.5G", "64M", "", ".", "1e9", "9999999999999TiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err == nil && n < 0 {
			t.Fatalf("ParseSize(%q) = %d, negative", s, n)
		}
	})
}

func TestFormatSize(t *testing.T) {
	tests := map[string]struct {
		in   int64
		want string
	}{
		"bytes": {1023, "1023 B"},
		"KiB":   {1536, "1.5 KiB"},
		"MiB":   {256 << 20, "256.0 MiB"},
		"GiB":   {1 << 30, "1.0 GiB"},
		"huge":  {5 << 50, "5120.0 TiB"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, FormatSize(tc.in)); diff != "" {
				t.Errorf("FormatSize(%d) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestParseSidecar(t *testing.T) {
	const d = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	tests := map[string]struct {
		in      string
		wantErr bool
	}{
		"sha256sum":   {in: d + "  img\n"},
		"binary mark": {in: d + " *img\n"},
		"bsd":         {in: "SHA256 (img) = " + d + "\n"},
		"bare":        {in: d},
		"uppercase":   {in: strings.ToUpper(d) + "  img"},
		"two lines":   {in: d + "  img\nsomething else\n"},
		"empty":       {in: "", wantErr: true},
		"short":       {in: d[:63] + "  img", wantErr: true},
		"md5":         {in: "d41d8cd98f00b204e9800998ecf8427e  img", wantErr: true},
		"not hex":     {in: strings.Repeat("g", 64), wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseSidecar([]byte(tc.in))
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseSidecar(%q) = %q, want an error", tc.in, got)
				}
				return
			}
			if err != nil || got != d {
				t.Fatalf("ParseSidecar(%q) = %q, %v", tc.in, got, err)
			}
		})
	}
}
