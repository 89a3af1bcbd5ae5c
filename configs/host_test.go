package configs

import (
	"errors"
	"net"
	"strings"
	"testing"
)

// ParseHost reports what `config check` reports for the same entry in a
// file, keyed relative to the entry.
func TestParseHost(t *testing.T) {
	mac, _ := net.ParseMAC("52:54:00:00:00:02")
	other, err := ParseHost([]byte(`{"mac":"52:54:00:00:00:01","address":"10.0.0.5"}`), Default(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for body, want := range map[string]string{
		`{"kernl":"x"}`:               `kernl: unknown key "kernl"; did you mean "kernel"?`,
		`{"pool":"x"}`:                `pool: unknown key "pool"; did you mean dhcp.pool?`,
		`{"address":"zz"}`:            `address: "zz" is not an IP address; write e.g. 192.168.50.1`,
		`{"address":"10.0.0.5"}`:      "address: 10.0.0.5 is also the address of hosts[0]; give each host its own",
		`{"default_boot":"disk"}`:     `default_boot: "disk" is not one of local, shell (or leave it out)`,
		`{"mac":"52:54:00:00:00:09"}`: "mac: 52:54:00:00:00:09 is not the MAC the entry is stored under",
		"kernel: a\nnmae: b\n":        `line 2: nmae: unknown key "nmae"`,
		`[1]`:                         "a host entry is one JSON object",
		`{"kernel":`:                  "not valid JSON",
	} {
		_, err := ParseHost([]byte(body), Default(), []Host{other}, mac)
		var es Errors
		if !errors.As(err, &es) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseHost(%s) = %v, want %q", body, err, want)
		}
	}
	// The same entry in a file: the same message after the key.
	_, err = Parse("lab.yaml", []byte("hosts:\n  - mac: 52:54:00:00:00:02\n    kernl: x\n"), Default())
	if err == nil || !strings.Contains(err.Error(), `hosts[0].kernl: unknown key "kernl"; did you mean "kernel"?`) {
		t.Errorf("the file's message differs: %v", err)
	}
	h, err := ParseHost([]byte(`{"name":"b","kernel":"k","labels":{"a":"b"}}`), Default(), []Host{other}, mac)
	if err != nil || h.MAC.String() != mac.String() || h.Kernel != "k" || h.Labels["a"] != "b" {
		t.Errorf("ParseHost of a good entry = %+v, %v", h, err)
	}
}

// FuzzParseHost: any body is an entry or errors keyed relative to the
// entry, never a panic.
func FuzzParseHost(f *testing.F) {
	for _, s := range []string{`{"kernel":"k"}`, `{"labels":{"a":"b"}}`, `{"address":"1.2.3.4"}`, `[`, `{"templates":{"pxelinux":"x"}}`, "a: [1"} {
		f.Add([]byte(s))
	}
	mac, _ := net.ParseMAC("52:54:00:00:00:02")
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := ParseHost(b, Default(), nil, mac)
		var es Errors
		if err != nil && !errors.As(err, &es) {
			t.Fatalf("error of another type: %T %v", err, err)
		}
		for _, e := range es {
			if strings.HasPrefix(e.Key, "hosts[") {
				t.Fatalf("key not relative: %q", e.Key)
			}
		}
	})
}
