package hosts

import (
	"maps"
	"net"
	"net/netip"
	"strings"

	"github.com/pxeperf/pxeperf/event"
)

// Of finds a fetch's client: by MAC when the fetch knows it, else by its
// address (a DHCP sighting, or a host entry's fixed address:). iperf3 and
// iperf 2 tests know only the address.
func (t *Table) Of(mac net.HardwareAddr, addr netip.Addr) (Client, bool) {
	if t == nil {
		return Client{}, false
	}
	if mac != nil {
		return t.ByMAC(mac)
	}
	if addr.IsValid() {
		return t.ByAddr(addr.Unmap())
	}
	return Client{}, false
}

// Stamp puts what the table knows of f's client on f: the MAC when f has
// none, the host entry's name when f has no host, and the entry's labels
// under f's own (a fetch's ?label. wins). It is the one place a fetch
// learns its host entry: serve stamps every event before any sink
// (Stamping), so the record, the dashboard's recent fetches, the metrics
// and the log line carry the same host and labels. Stamping twice changes
// nothing.
func (t *Table) Stamp(f *event.Fetch) (Client, bool) {
	c, ok := t.Of(f.MAC, f.Client.Addr())
	if !ok {
		c, ok = t.ofRPiFolder(f.File)
	}
	if !ok {
		return c, false
	}
	if f.MAC == nil && c.MAC != nil {
		f.MAC = c.MAC
	}
	if h := c.Host; h != nil {
		if f.Host == "" {
			f.Host = h.Name
		}
		f.Labels = c.Labels(f.Labels)
	}
	if c.Serial != "" && f.Labels[LabelRPiSerial] == "" {
		// A Pi is known by its serial (its TFTP folder) before any host
		// entry names it: the label keys its fetches.
		if f.Labels == nil {
			f.Labels = make(map[string]string, 1)
		}
		f.Labels[LabelRPiSerial] = c.Serial
	}
	return c, true
}

// LabelRPiSerial is the label a Raspberry Pi's fetches carry its serial
// under.
const LabelRPiSerial = "rpi_serial"

// Labels are the client's host entry labels with own over them (own
// wins): what Stamp puts on a fetch, and what an iPXE script sees as
// .Labels. A new map when the entry has labels, else own itself.
func (c Client) Labels(own map[string]string) map[string]string {
	if c.Host == nil || len(c.Host.Labels) == 0 {
		return own
	}
	l := make(map[string]string, len(c.Host.Labels)+len(own))
	maps.Copy(l, c.Host.Labels)
	maps.Copy(l, own)
	return l
}

// Stamping is a sink that stamps each fetch (Table.Stamp) before it hands
// it to Next.
type Stamping struct {
	Table *Table
	Next  event.Sink
}

func (s Stamping) Fetch(f *event.Fetch) {
	s.Table.Stamp(f)
	s.Next.Fetch(f)
}

func (s Stamping) Lease(l *event.Lease) { s.Next.Lease(l) }

// ofRPiFolder finds a Raspberry Pi by the folder its bootloader names,
// "<serial>/..." (a sighting's Serial) or "dc-a6-32-01-36-c2/...": in proxy
// mode DHCP never learns the Pi's address, so this is how its TFTP
// fetches find its MAC.
func (t *Table) ofRPiFolder(file string) (Client, bool) {
	prefix, _, found := strings.Cut(strings.TrimLeft(file, "/"), "/")
	switch {
	case t == nil || !found:
	case len(prefix) == 8:
		return t.BySerial(prefix)
	case len(prefix) == 17 && strings.Count(prefix, "-") == 5:
		if mac, err := net.ParseMAC(prefix); err == nil {
			return t.ByMAC(mac)
		}
	}
	return Client{}, false
}
