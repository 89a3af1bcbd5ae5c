package configs

import (
	"strings"
	"testing"
)

// TestSuggestAcrossKeys: "did you mean" weighs a swap of two letters as
// one edit (nmae is name, not mac) and looks in the whole key set when no
// key at the place is near (pool: at the top level is dhcp.pool).
func TestSuggestAcrossKeys(t *testing.T) {
	tests := map[string]struct {
		yaml, want, not string
	}{
		"swapped letters in a host": {"hosts:\n  - mac: 52:54:00:aa:bb:01\n    nmae: x\n", `hosts[0].nmae: unknown key "nmae"; did you mean "name"?`, `"mac"`},
		"swapped letters on top":    {"intreface: eth0\n", `did you mean "interface"?`, ""},
		"a key of another section":  {"pool: 10.0.0.1-10.0.0.9\n", "did you mean dhcp.pool?", `"root"`},
		"a name one edit off there": {"dhcp:\n  pol: 10.0.0.1-10.0.0.9\n", `did you mean "pool"?`, ""},
		"a key of several sections": {"dhcp:\n  listen: :67\n", "http.listen", "known keys here"},
		"a key of a host, on top":   {"kernel: vmlinuz\n", "did you mean hosts[].kernel?", ""},
		"nothing near":              {"dhcp:\n  zzzzzz: 1\n", "known keys here: boot_files", "did you mean"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tt.yaml), Default())
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error lacks %q:\n%v", tt.want, err)
			}
			if tt.not != "" && strings.Contains(err.Error(), tt.not) {
				t.Errorf("error has %q:\n%v", tt.not, err)
			}
		})
	}
	for _, c := range []struct {
		a, b string
		d    int
	}{{"nmae", "name", 1}, {"nmae", "mac", 2}, {"abc", "abc", 0}, {"", "abc", 3}, {"ca", "abc", 3}, {"kitten", "sitting", 3}} {
		if d := editDistance(c.a, c.b); d != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, d, c.d)
		}
	}
}
