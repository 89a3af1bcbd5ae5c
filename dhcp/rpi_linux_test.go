//go:build linux

package dhcp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// piClient is a Raspberry Pi 4 EEPROM bootloader on a namespace pair's
// client side: its DHCP options, its refusal of an offer without the
// "Raspberry Pi Boot" menu, its choice of TFTP server (option 66, else
// siaddr, else the server identifier) and its TFTP requests, in its order,
// each with tsize 0 and blksize 1024, the first aborted after the OACK.
type piClient struct {
	t      *testing.T
	p      *nstest.Pair
	mac    net.HardwareAddr
	serial uint32
	addr   netip.Addr
	tftp   netip.Addr
	conn   *net.UDPConn
}

// piFiles are the bootloader's requests after the folder probe, in order
// (start4.elf's first request, aborted after the OACK, comes before).
var piFiles = []string{"config.txt", "start4.elf", "fixup4.dat", "config.txt", "bcm2711-rpi-4-b.dtb",
	"overlays/overlay_map.dtb", "cmdline.txt", "kernel8.img", "initramfs8"}

// lease runs DISCOVER/OFFER/REQUEST/ACK and takes the address.
func (c *piClient) lease() {
	t := c.t
	info := RPiInfo{Model: "RPi4", Revision: 0x00c03111, Serial: c.serial}
	copy(info.MACLow[:], c.mac[2:])
	opt97 := AppendRPiOption97(nil, info)
	conn := clientConn(t, c.p, ClientPort)
	defer conn.Close()
	disc, err := dhcpv4.New(dhcpv4.WithHwAddr(c.mac), dhcpv4.WithMessageType(dhcpv4.MessageTypeDiscover),
		dhcpv4.WithBroadcast(true), piRequestOptions(opt97))
	if err != nil {
		t.Fatal(err)
	}
	bcast := netip.MustParseAddrPort("255.255.255.255:67")
	offer := exchange(t, conn, disc, bcast)
	if offer == nil {
		t.Fatal("pi: no OFFER")
	}
	if !piMenu(offer.Options.Get(dhcpv4.OptionVendorSpecificInformation)) {
		t.Fatalf("pi: the bootloader ignores this OFFER: option 43 %x has no sub-option 9 \"Raspberry Pi Boot\"",
			offer.Options.Get(dhcpv4.OptionVendorSpecificInformation))
	}
	c.tftp = piTFTPServer(offer)
	req, err := dhcpv4.New(dhcpv4.WithHwAddr(c.mac), dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
		dhcpv4.WithBroadcast(true), piRequestOptions(opt97), dhcpv4.WithTransactionID(offer.TransactionID),
		dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(offer.YourIPAddr)),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(offer.ServerIdentifier())))
	if err != nil {
		t.Fatal(err)
	}
	ack := exchange(t, conn, req, bcast)
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck {
		t.Fatalf("pi: REQUEST got %v, want ACK", ack)
	}
	c.addr, _ = netip.AddrFromSlice(ack.YourIPAddr.To4())
	nstest.Run(t, c.p.Client, "ip", "addr", "flush", "dev", c.p.ClientIf)
	nstest.Run(t, c.p.Client, "ip", "addr", "add", c.addr.String()+"/24", "dev", c.p.ClientIf)
}

// piMenu is the bootloader's own test of option 43, written apart from
// the server's: a sub-option 9 whose value holds "Raspberry Pi Boot".
func piMenu(v []byte) bool {
	for i := 0; i+1 < len(v) && v[i] != 255; i += 2 + int(v[i+1]) {
		if end := i + 2 + int(v[i+1]); end <= len(v) && v[i] == 9 && bytes.Contains(v[i+2:end], []byte("Raspberry Pi Boot")) {
			return true
		}
	}
	return false
}

// piTFTPServer: option 66 when it is a dotted quad, else siaddr, else the
// server identifier.
func piTFTPServer(o *dhcpv4.DHCPv4) netip.Addr {
	if a, err := netip.ParseAddr(string(o.Options.Get(dhcpv4.OptionTFTPServerName))); err == nil && a.Is4() {
		return a
	}
	if a, ok := netip.AddrFromSlice(o.ServerIPAddr.To4()); ok && !a.IsUnspecified() {
		return a
	}
	a, _ := netip.AddrFromSlice(o.ServerIdentifier().To4())
	return a
}

// boot runs the TFTP part and returns each file's content ("" and its
// error's text for a missing one), keyed by the name asked for; prefix is
// the folder the bootloader settled on ("" after a failed probe).
func (c *piClient) boot() (prefix string, got map[string]string) {
	t := c.t
	prefix = fmt.Sprintf("%08x/", c.serial)
	if _, err := c.get(prefix+"start4.elf", true); err != nil && !errors.Is(err, errPiAborted) {
		if !isNotFound(err) {
			t.Fatalf("pi: folder probe: %v", err)
		}
		prefix = ""
	}
	got = map[string]string{}
	for _, f := range piFiles {
		b, err := c.get(prefix+f, false)
		if err != nil {
			if !isNotFound(err) {
				t.Fatalf("pi: %s%s: %v (a missing file must be answered with ERROR 1)", prefix, f, err)
			}
			got[prefix+f] = ""
			continue
		}
		got[prefix+f] = string(b)
	}
	return prefix, got
}

var errPiAborted = errors.New("aborted after the OACK")

type tftpError struct {
	code uint16
	msg  string
}

func (e *tftpError) Error() string { return fmt.Sprintf("TFTP ERROR %d %q", e.code, e.msg) }

func isNotFound(err error) bool {
	var te *tftpError
	return errors.As(err, &te) && te.code == 1
}

// get reads one file as the bootloader does; abort sends ERROR 8 on the
// OACK instead of ACK 0.
//
// Each request leaves from a port of its own: from one port, a request
// right after a transfer's last ACK can find pxeperf still waiting for
// that ACK, and the transfer is recorded as replaced (a race of the
// TFTP server's, left to its owners).
func (c *piClient) get(name string, abort bool) ([]byte, error) {
	if err := nstest.Do(c.p.Client, func() error {
		var err error
		c.conn, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(c.addr, 0)))
		return err
	}); err != nil {
		c.t.Fatal(err)
	}
	defer c.conn.Close()
	rrq := []byte{0, 1}
	for _, s := range []string{name, "octet", "tsize", "0", "blksize", "1024"} {
		rrq = append(append(rrq, s...), 0)
	}
	server := netip.AddrPortFrom(c.tftp, 69)
	buf := make([]byte, 2048)
	var tid netip.AddrPort
	var out bytes.Buffer
	blk, next := 512, uint16(1)
	send := func(p []byte, to netip.AddrPort) {
		if _, err := c.conn.WriteToUDPAddrPort(p, to); err != nil {
			c.t.Fatal(err)
		}
	}
	last, lastTo := rrq, server
	send(last, lastTo)
	for tries := 0; tries < 2000; tries++ {
		c.conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		n, from, err := c.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if tries > 10 {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			send(last, lastTo) // lost: send the last packet again
			continue
		}
		p := buf[:n]
		if n < 4 || (tid.IsValid() && from != tid) {
			continue
		}
		tid = from
		switch op := binary.BigEndian.Uint16(p); op {
		case 5:
			return nil, &tftpError{binary.BigEndian.Uint16(p[2:]), strings.TrimRight(string(p[4:]), "\x00")}
		case 6:
			if !bytes.Contains(p, []byte("tsize\x00")) {
				return nil, fmt.Errorf("%s: OACK %q without tsize", name, p[2:])
			}
			if abort {
				send(append([]byte{0, 5, 0, 8}, "abort\x00"...), tid)
				return nil, errPiAborted
			}
			if bytes.Contains(p, []byte("blksize\x001024\x00")) {
				blk = 1024
			}
			last, lastTo = []byte{0, 4, 0, 0}, tid
			send(last, lastTo)
		case 3:
			if binary.BigEndian.Uint16(p[2:]) == next {
				out.Write(p[4:])
				next++
			}
			last, lastTo = []byte{0, 4, p[2], p[3]}, tid
			send(last, lastTo)
			if n-4 < blk && binary.BigEndian.Uint16(p[2:]) == next-1 {
				return out.Bytes(), nil
			}
		}
	}
	return nil, fmt.Errorf("%s: no end after 2000 packets", name)
}

// piRoot fills root with a Pi 4's boot files (overlays/overlay_map.dtb
// left out: the firmware goes on without it), and the folder of serial
// with the same files but a config.txt of its own.
func piRoot(t *testing.T, root, serial string) {
	put := func(name, body string) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, f := range piFiles {
		if f == "overlays/overlay_map.dtb" {
			continue
		}
		// Sizes that end on, just past and well past a 1024-byte block.
		body := strings.Repeat(fmt.Sprintf("%s %d\n", f, i), 1+i*700)
		if f == "config.txt" {
			body = "# root config.txt\n"
		}
		put(f, body)
		if f == "config.txt" {
			body = "# config.txt of " + serial + "\n"
		}
		put(serial+"/"+f, body)
	}
}

// TestRPiBootsFromBinary: two Pi 4 bootloaders against the built binary in
// full mode. The one with a serial folder boots from it (its own
// config.txt); the other, with no folder, boots from the root through its
// serial prefix; a missing overlay_map.dtb is ERROR 1 for both; every
// fetch is on record with the Pi's MAC and its serial label; the probe
// aborted after the OACK is no error record.
func TestRPiBootsFromBinary(t *testing.T) {
	nstest.RequireRoot(t)
	p := nstest.NewPair(t, nstest.Options{NoClientIP: true})
	s := p.Serve(t, fmt.Sprintf("dhcp:\n  mode: full\n  pool: %s\nhttp:\n  listen: %s:8080\ntftp:\n  listen: %s:69\n",
		poolFor(p, 100, 120), p.ServerIP, p.ServerIP), func(root string) { piRoot(t, root, "1a2b3c4d") })
	for _, tc := range []struct {
		mac        string
		serial     uint32
		wantConfig string
	}{
		{"dc:a6:32:01:36:c2", 0x1a2b3c4d, "# config.txt of 1a2b3c4d\n"},
		{"e4:5f:01:aa:bb:cc", 0x5e6f7a8b, "# root config.txt\n"},
	} {
		setMAC(t, p, tc.mac)
		hw, _ := net.ParseMAC(tc.mac)
		c := &piClient{t: t, p: p, mac: hw, serial: tc.serial}
		c.lease()
		if c.tftp != p.ServerIP {
			t.Fatalf("pi %s: TFTP server %s, want %s", tc.mac, c.tftp, p.ServerIP)
		}
		prefix, got := c.boot()
		want := fmt.Sprintf("%08x/", tc.serial)
		if prefix != want {
			t.Fatalf("pi %s: folder %q, want %q (the probe of start4.elf must find it)", tc.mac, prefix, want)
		}
		root, _ := os.ReadFile(filepath.Join(s.Root, "kernel8.img"))
		if got[prefix+"config.txt"] != tc.wantConfig || got[prefix+"kernel8.img"] != string(root) ||
			got[prefix+"overlays/overlay_map.dtb"] != "" {
			t.Fatalf("pi %s: config.txt %q (want %q), kernel8.img %d bytes (want %d), overlay_map.dtb %q (want ERROR 1)",
				tc.mac, got[prefix+"config.txt"], tc.wantConfig, len(got[prefix+"kernel8.img"]), len(root),
				got[prefix+"overlays/overlay_map.dtb"])
		}
		checkPiRecords(t, s, hw, prefix)
	}
}

// checkPiRecords: every one of the Pi's fetches is on record with its MAC
// and serial label, none of them an error: the probe aborted after the
// OACK and the missing overlay map are probes.
func checkPiRecords(t *testing.T, s *nstest.Served, hw net.HardwareAddr, prefix string) {
	t.Helper()
	serial := strings.TrimSuffix(prefix, "/")
	want := len(piFiles) + 1
	var recs []nstest.Record
	ok := nstest.WaitFor(20*time.Second, func() bool {
		all, err := s.Fetches(url.Values{"client_mac": {hw.String()}})
		if err != nil {
			t.Fatal(err)
		}
		recs = recs[:0]
		for _, r := range all {
			if r.ClientMAC == hw.String() {
				recs = append(recs, r)
			}
		}
		return len(recs) >= want
	})
	if !ok {
		t.Fatalf("pi %s: %d records, want %d: %+v", hw, len(recs), want, recs)
	}
	for _, r := range recs {
		if r.Labels["rpi_serial"] != serial || !strings.HasPrefix(r.File, prefix) {
			t.Errorf("pi %s: record %s %s labels %v, want rpi_serial %s", hw, r.File, r.Outcome, r.Labels, serial)
		}
	}
	errs, err := s.Fetches(url.Values{"client_mac": {hw.String()}, "kind": {"error"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range errs {
		if r.ClientMAC == hw.String() {
			t.Errorf("pi %s: %s (%s) is an error record; a Pi's size probe and optional files are probes", hw, r.File, r.Outcome)
		}
	}
}

// TestRPiProxyModeBinary: in proxy mode the built binary's OFFER to the
// Pi carries no address but the boot menu, option 66 and siaddr; with the
// address the network's DHCP server would give, the Pi boots from the root
// through its serial prefix, its missing overlay map an ERROR 1, and its
// fetches carry its MAC and serial.
func TestRPiProxyModeBinary(t *testing.T) {
	nstest.RequireRoot(t)
	p := nstest.NewPair(t, nstest.Options{NoClientIP: true})
	s := p.Serve(t, fmt.Sprintf("dhcp:\n  mode: proxy\nhttp:\n  listen: %s:8080\ntftp:\n  listen: %s:69\n",
		p.ServerIP, p.ServerIP), func(root string) { piRoot(t, root, "1a2b3c4d") })
	setMAC(t, p, "d8:3a:dd:00:00:07")
	hw, _ := net.ParseMAC("d8:3a:dd:00:00:07")
	c := &piClient{t: t, p: p, mac: hw, serial: 0x00c0ffee}
	info := RPiInfo{Model: "RPi4", Revision: 0x00c03111, Serial: c.serial}
	conn := clientConn(t, p, ClientPort)
	disc, err := dhcpv4.New(dhcpv4.WithHwAddr(hw), dhcpv4.WithMessageType(dhcpv4.MessageTypeDiscover),
		dhcpv4.WithBroadcast(true), piRequestOptions(AppendRPiOption97(nil, info)))
	if err != nil {
		t.Fatal(err)
	}
	offer := exchange(t, conn, disc, netip.MustParseAddrPort("255.255.255.255:67"))
	conn.Close()
	if offer == nil || !piMenu(offer.Options.Get(dhcpv4.OptionVendorSpecificInformation)) ||
		!offer.YourIPAddr.IsUnspecified() || offer.BootFileName != "" {
		t.Fatalf("proxy OFFER %v: want no address, no file, the Raspberry Pi boot menu", offer)
	}
	if c.tftp = piTFTPServer(offer); c.tftp != p.ServerIP {
		t.Fatalf("proxy OFFER names TFTP server %s, want %s", c.tftp, p.ServerIP)
	}
	c.addr = p.ClientIP
	nstest.Run(t, p.Client, "ip", "addr", "add", c.addr.String()+"/24", "dev", p.ClientIf)
	prefix, got := c.boot()
	if prefix != "00c0ffee/" || got[prefix+"config.txt"] != "# root config.txt\n" || got[prefix+"overlays/overlay_map.dtb"] != "" {
		t.Fatalf("proxy boot: folder %q, config.txt %q, overlay map %q", prefix, got[prefix+"config.txt"],
			got[prefix+"overlays/overlay_map.dtb"])
	}
	checkPiRecords(t, s, hw, prefix) // found by the serial of its folder: no lease maps its address
}
