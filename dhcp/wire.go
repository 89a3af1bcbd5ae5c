package dhcp

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// The request path reads and writes DHCP messages itself: parsing into
// dhcpv4's option map and building replies through it cost more than the
// rest of the handler (see DESIGN.md#its-own-codec). parse
// accepts exactly what dhcpv4.FromBytes plus checkRequest accept and reads
// the same values (FuzzParseMatchesDHCPv4 holds it to that), keeping only
// the options pxeperf uses; reply writes what dhcpv4's ToBytes wrote
// (options in code order, RFC 3396 splitting, padding to BOOTP's 300
// bytes), with option 53 first. Tests still read every reply with dhcpv4.

// Option codes the request path reads or writes.
const (
	optSubnetMask   = 1
	optRouter       = 3
	optDNS          = 6
	optHostname     = 12
	optDomainName   = 15
	optVendor       = 43
	optRequestedIP  = 50
	optLeaseTime    = 51
	optMessageType  = 53
	optServerID     = 54
	optParamRequest = 55
	optMessage      = 56
	optMaxSize      = 57
	optRenewal      = 58
	optRebinding    = 59
	optClassID      = 60
	optClientID     = 61
	optTFTPServer   = 66
	optBootFile     = 67
	optRelayInfo    = 82
)

// kept lists the request options parse keeps, by slot.
var kept = [...]byte{optRequestedIP, optMessageType, optServerID, optParamRequest, optClassID, optClientID,
	optUserClass, optRelayInfo, optClientArch, optClientUUID, optIPXEEncap, optMaxSize}

// slotOf maps an option code to its slot in msg.opt, or -1.
var slotOf = func() (s [256]int8) {
	for i := range s {
		s[i] = -1
	}
	for i, c := range kept {
		s[c] = int8(i)
	}
	return s
}()

// msg is a parsed request. Option values point into the datagram (a
// repeated option, which RFC 3396 says to concatenate, is copied), so a msg
// is valid only while its datagram is.
type msg struct {
	htype  byte
	xid    dhcpv4.TransactionID
	flags  uint16
	ciaddr netip.Addr
	giaddr netip.Addr
	chaddr net.HardwareAddr // a copy: it outlives the datagram in events and tables
	mt     dhcpv4.MessageType
	opt    [len(kept)][]byte
	has    [len(kept)]bool // present, even with no value
}

var (
	errShort     = errors.New("shorter than a DHCP header")
	errCookie    = errors.New("malformed DHCP packet: no magic cookie")
	errOptions   = errors.New("error collecting options: truncated option")
	errNoEnd     = errors.New("options end without the End option")
	errNotReq    = errors.New("not a BOOTREQUEST")
	errNoHW      = errors.New("no client hardware address")
	errNoMsgType = errors.New("no DHCP message type (plain BOOTP is not served)")
)

// parse reads a request into m; it fails where dhcpv4.FromBytes or
// checkRequest would.
func (m *msg) parse(b []byte) error {
	*m = msg{}
	if len(b) < 240 {
		return errShort
	}
	if [4]byte(b[236:240]) != [4]byte{99, 130, 83, 99} {
		return errCookie
	}
	end := false
	for o := b[240:]; len(o) > 0; {
		code := o[0]
		if code == 0 {
			o = o[1:]
			continue
		}
		if code == 255 {
			end = true
			break
		}
		if len(o) < 2 || len(o) < 2+int(o[1]) {
			return errOptions
		}
		v := o[2 : 2+int(o[1]) : 2+int(o[1])]
		o = o[2+len(v):]
		i := slotOf[code]
		if i < 0 {
			continue
		}
		switch {
		case !m.has[i] || len(v) == 0:
			if !m.has[i] {
				m.opt[i] = v
			}
		case len(m.opt[i]) == 0:
			m.opt[i] = v
		default:
			m.opt[i] = append(append([]byte(nil), m.opt[i]...), v...)
		}
		m.has[i] = true
	}
	if !end {
		return errNoEnd
	}
	if b[0] != byte(dhcpv4.OpcodeBootRequest) {
		return errNotReq
	}
	hlen := min(int(b[2]), 16)
	if hlen == 0 {
		return errNoHW
	}
	if v := m.get(optMessageType); len(v) == 1 {
		m.mt = dhcpv4.MessageType(v[0])
	}
	if m.mt == dhcpv4.MessageTypeNone {
		return errNoMsgType
	}
	m.htype = b[1]
	m.xid = dhcpv4.TransactionID(b[4:8])
	m.flags = binary.BigEndian.Uint16(b[10:12])
	m.ciaddr = netip.AddrFrom4([4]byte(b[12:16]))
	m.giaddr = netip.AddrFrom4([4]byte(b[24:28]))
	m.chaddr = append(net.HardwareAddr(nil), b[28:28+hlen]...)
	return nil
}

// get returns option code's value, nil when absent or empty (as
// dhcpv4.Options.Get).
func (m *msg) get(code byte) []byte {
	if i := slotOf[code]; i >= 0 && len(m.opt[i]) > 0 {
		return m.opt[i]
	}
	return nil
}

// present reports whether the option was sent, even empty (as Options.Has).
func (m *msg) present(code byte) bool {
	i := slotOf[code]
	return i >= 0 && m.has[i]
}

// ipOption is an option holding exactly one IPv4 address, else the zero
// Addr (as dhcpv4.GetIP).
func (m *msg) ipOption(code byte) netip.Addr {
	if v := m.get(code); len(v) == 4 {
		return netip.AddrFrom4([4]byte(v))
	}
	return netip.Addr{}
}

func (m *msg) requestedIP() netip.Addr { return m.ipOption(optRequestedIP) }
func (m *msg) serverID() netip.Addr    { return m.ipOption(optServerID) }
func (m *msg) broadcast() bool         { return m.flags&0x8000 != 0 }

// requested reports whether option 55 lists code; without a list (or an
// empty one) every option counts as requested (RFC 2131 §3.5).
func (m *msg) requested(code byte) bool {
	l := m.get(optParamRequest)
	if l == nil {
		return true
	}
	for _, c := range l {
		if c == code {
			return true
		}
	}
	return false
}

// requestIndex is code's place in option 55 (0 first), -1 when the list
// does not name it; without a list every option is asked for, at 0.
func (m *msg) requestIndex(code byte) int {
	l := m.get(optParamRequest)
	if l == nil {
		return 0
	}
	for i, c := range l {
		if c == code {
			return i
		}
	}
	return -1
}

// Reply sizes: a client takes a DHCP message of 576 bytes of IP datagram
// (RFC 2131 §2), more only when option 57 says so; pxeperf stays within
// an Ethernet frame whatever 57 says, as it never fragments.
const (
	ipUDPHeaders   = 28
	minMessageSize = 576
	maxMessageSize = 1500
)

// maxReply is the largest DHCP message (without IP and UDP headers) the
// client accepts.
func (m *msg) maxReply() int {
	n := minMessageSize
	if v := m.get(optMaxSize); len(v) == 2 {
		n = min(max(int(binary.BigEndian.Uint16(v)), minMessageSize), maxMessageSize)
	}
	return n - ipUDPHeaders
}

// reply is a reply being built. Option values live in data, so building
// one allocates nothing once a worker's reply has grown to its size.
type reply struct {
	mt     dhcpv4.MessageType
	htype  byte
	xid    dhcpv4.TransactionID
	flags  uint16
	ciaddr netip.Addr
	yiaddr netip.Addr
	siaddr netip.Addr
	giaddr netip.Addr
	chaddr net.HardwareAddr
	file   string
	opts   []ropt
	data   []byte
	// limit is the longest message the client takes (maxReply); ranked
	// counts the configured options (rank > 0), which appendTo drops,
	// highest rank first, until the reply fits; dropped counts those.
	limit, ranked, dropped int
	has                    codeSet // the codes in opts
}

// codeSet is a set of option codes.
type codeSet [4]uint64

func (c *codeSet) add(code byte)           { c[code/64] |= 1 << (code % 64) }
func (c *codeSet) remove(code byte)        { c[code/64] &^= 1 << (code % 64) }
func (c *codeSet) contains(code byte) bool { return c[code/64]&(1<<(code%64)) != 0 }

// ropt is an option of the reply. rank is 0 for pxeperf's own options,
// which are always sent; a configured option pxeperf would not send
// otherwise has 1 when forced, else 2 + its place in option 55, so the
// options the client asked for last are the first to go when the reply is
// too long.
type ropt struct {
	code       byte
	rank       uint16
	start, end int // in data
}

// start resets r for a reply of type mt to req, with what every reply
// carries: server identifier, and the relay agent information (82) and
// client identifier (61) echoed.
func (r *reply) start(req *msg, mt dhcpv4.MessageType, server netip.Addr) {
	if r.opts == nil {
		r.opts, r.data = make([]ropt, 0, 24), make([]byte, 0, 512)
	}
	*r = reply{mt: mt, htype: req.htype, xid: req.xid, flags: req.flags, giaddr: req.giaddr, chaddr: req.chaddr,
		opts: r.opts[:0], data: r.data[:0], limit: req.maxReply()}
	r.setIP(optServerID, server)
	for _, code := range []byte{optRelayInfo, optClientID} {
		if v := req.get(code); v != nil {
			r.set(code, v)
		}
	}
}

func (r *reply) setBroadcast() { r.flags |= 0x8000 }

// set adds option code with value v, replacing an earlier value.
func (r *reply) set(code byte, v []byte) {
	s := len(r.data)
	r.data = append(r.data, v...)
	r.put(code, s)
}

func (r *reply) setString(code byte, v string) {
	s := len(r.data)
	r.data = append(r.data, v...)
	r.put(code, s)
}

func (r *reply) put(code byte, start int) {
	for i := range r.opts {
		if r.opts[i].code == code {
			r.opts[i].start, r.opts[i].end = start, len(r.data)
			return
		}
	}
	r.opts = append(r.opts, ropt{code: code, start: start, end: len(r.data)})
	r.has.add(code)
}

// index is code's place in r.opts, -1 when the reply has no such option.
func (r *reply) index(code byte) int {
	if !r.has.contains(code) {
		return -1
	}
	for i := range r.opts {
		if r.opts[i].code == code {
			return i
		}
	}
	return -1
}

// setRanked adds a configured option of rank (> 0, see ropt) that the
// reply does not have yet.
func (r *reply) setRanked(code byte, v string, rank uint16) {
	s := len(r.data)
	r.data = append(r.data, v...)
	r.opts = append(r.opts, ropt{code: code, start: s, end: len(r.data), rank: rank})
	r.has.add(code)
	r.ranked++
}

// size is the length of the message appendTo writes, before padding.
func (r *reply) size() int {
	n := 240 + 3 + 1 // header and cookie, option 53, End
	for _, o := range r.opts {
		l := o.end - o.start
		n += l + 2*max(1, (l+254)/255)
	}
	return n
}

// fit drops configured options, highest rank first (the later of two of
// the same rank), until the reply is within r.limit.
func (r *reply) fit() {
	for r.ranked > 0 && r.size() > r.limit {
		j := -1
		for i, o := range r.opts {
			if o.rank > 0 && (j < 0 || o.rank >= r.opts[j].rank) {
				j = i
			}
		}
		r.has.remove(r.opts[j].code)
		r.opts = append(r.opts[:j], r.opts[j+1:]...)
		r.ranked--
		r.dropped++
	}
}

func (r *reply) setIP(code byte, a netip.Addr) {
	s := len(r.data)
	b := a.As4()
	r.data = append(r.data, b[:]...)
	r.put(code, s)
}

func (r *reply) setIPs(code byte, as []netip.Addr) {
	s := len(r.data)
	for _, a := range as {
		b := a.As4()
		r.data = append(r.data, b[:]...)
	}
	r.put(code, s)
}

// setSeconds writes a duration as option 51/58/59 do: whole seconds,
// 32 bits.
func (r *reply) setSeconds(code byte, d time.Duration) {
	s := len(r.data)
	r.data = binary.BigEndian.AppendUint32(r.data, uint32(d/time.Second))
	r.put(code, s)
}

// appendTo appends the reply's datagram to b: the BOOTP header, option 53,
// the other options in code order (long ones split, RFC 3396), End, and
// padding to 300 bytes (RFC 951; some relays drop shorter messages).
// Configured options that would make it longer than the client takes are
// left out (fit).
func (r *reply) appendTo(b []byte) []byte {
	base := len(b)
	b = append(b, byte(dhcpv4.OpcodeBootReply), r.htype, byte(len(r.chaddr)), 0)
	b = append(b, r.xid[:]...)
	b = append(b, 0, 0, byte(r.flags>>8), byte(r.flags))
	for _, a := range [...]netip.Addr{r.ciaddr, r.yiaddr, r.siaddr, r.giaddr} {
		v := [4]byte{}
		if a.Is4() {
			v = a.As4()
		}
		b = append(b, v[:]...)
	}
	b = append(b, r.chaddr...)
	b = append(b, make([]byte, 16-len(r.chaddr)+64)...) // chaddr padding, sname
	f := len(b)
	b = append(b, make([]byte, 128)...)
	copy(b[f:f+127], r.file)
	b = append(b, 99, 130, 83, 99, optMessageType, 1, byte(r.mt))
	r.fit()
	// Options in code order: insertion sort of a dozen entries.
	for i := 1; i < len(r.opts); i++ {
		for j := i; j > 0 && r.opts[j].code < r.opts[j-1].code; j-- {
			r.opts[j], r.opts[j-1] = r.opts[j-1], r.opts[j]
		}
	}
	for _, o := range r.opts {
		v := r.data[o.start:o.end]
		if len(v) == 0 {
			b = append(b, o.code, 0)
		}
		for len(v) > 0 {
			n := min(len(v), 255)
			b = append(b, o.code, byte(n))
			b = append(b, v[:n]...)
			v = v[n:]
		}
	}
	b = append(b, 255)
	if n := len(b) - base; n < 300 {
		b = append(b, make([]byte, 300-n)...)
	}
	return b
}
