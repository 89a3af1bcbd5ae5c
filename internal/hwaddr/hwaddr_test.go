package hwaddr

import (
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := map[string]struct {
		in   string
		sep  byte
		want net.HardwareAddr // nil: not an address
	}{
		"ethernet":          {in: "52:54:00:aa:0b:0c", sep: ':', want: net.HardwareAddr{0x52, 0x54, 0, 0xaa, 0x0b, 0x0c}},
		"dashes, upper":     {in: "AA-BB-CC-DD-EE-FF", sep: '-', want: net.HardwareAddr{0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}},
		"mixed case":        {in: "aA-bB-cC-dD-eE-fF", sep: '-', want: net.HardwareAddr{0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}},
		"one byte":          {in: "0f", sep: ':', want: net.HardwareAddr{0x0f}},
		"chaddr 16":         {in: strings.Repeat("01:", 15) + "02", sep: ':', want: append(net.HardwareAddr(strings.Repeat("\x01", 15)), 2)},
		"longest":           {in: strings.Repeat("ff:", MaxLen-1) + "ff", sep: ':', want: net.HardwareAddr(strings.Repeat("\xff", MaxLen))},
		"too long":          {in: strings.Repeat("ff:", MaxLen) + "ff", sep: ':'},
		"other separator":   {in: "52-54-00-aa-0b-0c", sep: ':'},
		"mixed separators":  {in: "52:54-00:aa:0b:0c", sep: ':'},
		"not hex":           {in: "52:54:00:aa:0b:0g", sep: ':'},
		"one digit":         {in: "5:54:00:aa:0b:0c", sep: ':'},
		"trailing sep":      {in: "52:54:", sep: ':'},
		"empty":             {in: "", sep: ':'},
		"single digit only": {in: "a", sep: ':'},
		"dotted form":       {in: "5254.00aa.0b0c", sep: '.'},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := Parse(tc.in, tc.sep)
			if ok != (tc.want != nil) {
				t.Fatalf("Parse(%q, %q) = %v, %v", tc.in, tc.sep, got, ok)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse(%q, %q) (-want +got):\n%s", tc.in, tc.sep, diff)
			}
		})
	}
}

func TestIsHex(t *testing.T) {
	for s, want := range map[string]bool{"": true, "C0A8320A": true, "c0a8": true, "0123456789abcdefABCDEF": true, "C0A8G": false, "0x1": false, " 1": false} {
		if got := IsHex(s); got != want {
			t.Errorf("IsHex(%q) = %v, want %v", s, got, want)
		}
	}
}

// FuzzParse: what Parse reads prints back to the same text (lower case,
// ':' for sep) and, for the lengths net.ParseMAC takes, to its address.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"52:54:00:aa:0b:0c", "AA-BB-CC-DD-EE-FF", "0f", "", "a:", "01:02:03:04:05:06:07:08"} {
		f.Add(s, byte(':'))
	}
	f.Add("aa-bb-cc-dd-ee-ff", byte('-'))
	f.Fuzz(func(t *testing.T, s string, sep byte) {
		got, ok := Parse(s, sep)
		if !ok {
			return
		}
		want := []byte(s)
		for i, c := range want {
			switch {
			case i%3 == 2:
				want[i] = ':'
			case 'A' <= c && c <= 'F':
				want[i] = c - 'A' + 'a'
			}
		}
		if got.String() != string(want) {
			t.Fatalf("Parse(%q, %q) = %v, want %q", s, sep, got, want)
		}
		if len(got) == 6 || len(got) == 8 || len(got) == 20 {
			if sep == ':' || sep == '-' {
				if std, err := net.ParseMAC(s); err != nil || std.String() != got.String() {
					t.Fatalf("Parse(%q, %q) = %v; net.ParseMAC = %v, %v", s, sep, got, std, err)
				}
			}
		}
	})
}
