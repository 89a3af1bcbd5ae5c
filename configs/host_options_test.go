package configs

import (
	"net"
	"strings"
	"testing"
)

// TestParseHostDHCPOptions: a host entry sent as JSON (the host API's body)
// carries dhcp_options through the same parser and checks as a YAML file:
// a good option is kept with its code, and a bad one is refused keyed
// relative to the entry, with the fix config check prints.
func TestParseHostDHCPOptions(t *testing.T) {
	mac, _ := net.ParseMAC("52:54:00:12:34:56")
	h, err := ParseHost([]byte(`{"name":"b1","dhcp_options":{"root_path":"10.0.0.1:/srv/nfs","ntp_servers":["10.0.0.2"],"224":{"value":"hex:01ab","force":true}}}`), Default(), nil, mac)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[byte]bool{}
	for _, o := range h.DHCPOptions {
		codes[o.Code()] = o.Force || codes[o.Code()]
	}
	if _, ok := codes[17]; !ok {
		t.Errorf("root_path (17) not parsed: %+v", h.DHCPOptions)
	}
	if _, ok := codes[42]; !ok {
		t.Errorf("ntp_servers (42) not parsed: %+v", h.DHCPOptions)
	}
	if !codes[224] {
		t.Errorf("raw 224 not parsed as forced: %+v", h.DHCPOptions)
	}
	_, err = ParseHost([]byte(`{"dhcp_options":{"ntp_servers":"not-an-ip"}}`), Default(), nil, mac)
	if err == nil || !strings.Contains(err.Error(), "dhcp_options.ntp_servers") {
		t.Errorf("a bad option value: %v, want an error keyed dhcp_options.ntp_servers", err)
	}
}
