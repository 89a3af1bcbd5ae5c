package hosts

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/configs"
)

// FuzzHostMapRoundTrip: an entry ParseHost takes is stored as HostMap's
// JSON and read back the same (what hosts.json and the API rely on).
func FuzzHostMapRoundTrip(f *testing.F) {
	for _, s := range []string{
		`{"name":"b","kernel":"k","initrd":"i","cmdline":"a=1 b","labels":{"rack":"r1"},"address":"10.0.0.9"}`,
		`{"script":"#!ipxe\necho {{.MAC}}\n","default_boot":"local","templates":{"grub":"@g.tmpl"}}`,
		`{"fdt":"x.dtb","fdtdir":"dtbs/","boot_file":"ipxe.efi","labels":{"n":"1"}}`,
	} {
		f.Add([]byte(s))
	}
	mac := mustMAC("52:54:00:00:00:02")
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := configs.ParseHost(b, configs.Default(), nil, mac)
		if err != nil {
			return
		}
		m, err := HostMap(runtimeHost(h))
		if err != nil {
			t.Fatal(err)
		}
		j, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		h2, err := configs.ParseHost(j, configs.Default(), nil, mac)
		if err != nil {
			t.Fatalf("stored form %s does not read back: %v", j, err)
		}
		m2, _ := HostMap(runtimeHost(h2))
		if d := cmp.Diff(m, m2); d != "" {
			t.Fatalf("round trip of %s (-stored +read):\n%s", j, d)
		}
	})
}
