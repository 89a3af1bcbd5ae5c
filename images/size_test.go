package images

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

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
