// Package dhcp is pxeperf's DHCPv4 server for network boot.
//
// In full mode it is the network's DHCP server: it leases addresses from a
// pool (per-MAC reservations from the host entries), journals every lease
// to the data folder before the ACK goes out, and adds boot information for
// boot clients. In proxy mode it runs beside an existing DHCP server and
// only answers PXE and HTTP boot clients (option 60 "PXEClient" or
// "HTTPClient"), on port 67 and on the PXE port 4011, never handing out an
// address. Either way it tells the hosts table what it saw of each client
// and sends an event.Lease per answer to the event sink.
//
// Boot file choice (see booter.decide): iPXE gets the HTTP script URL, UEFI
// HTTP boot a full URL, PXE ROMs the file for their option 93 architecture.
//
// Bad packets are dropped, counted (Server.Stats) and logged at debug.
// Budgets (budget.go) keep a flood of clients from starving the pool or
// growing the tables; what they turn away is counted in Stats.Refused and
// logged once per client per minute.
package dhcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/internal/refuse"
)

// ClientPort is the port DHCP clients listen on.
const ClientPort = 68

// Options build a Server.
type Options struct {
	Config *configs.Config // DHCP section, hosts, data folder, HTTP listen
	// Iface is the interface to bind to (SO_BINDTODEVICE); "" binds none
	// (unit tests on loopback).
	Iface  string
	Addr   netip.Addr   // our address: server identifier, next-server, URLs
	Prefix netip.Prefix // Addr's subnet, for the netmask when dhcp.netmask is unset
	Hosts  *hosts.Table // required
	Sink   event.Sink   // nil: event.Discard
	Logger *slog.Logger // nil: discard
	// Workers per socket; 0 means 64. Each owns one receive buffer. Many
	// workers let ACKs waiting on the journal's fsync share one flush.
	Workers int

	noSync bool // fuzzing: skip fsync of the lease journal
}

// Stats counts packets; read it with Server.Stats.
type Stats struct {
	Received  uint64 // datagrams read
	Malformed uint64 // not a DHCP request pxeperf could parse
	Ignored   uint64 // valid but not for us (proxy: not a boot client; other server chosen; ...)
	Offers    uint64
	Acks      uint64
	Naks      uint64
	Releases  uint64
	Declines  uint64
	Informs   uint64
	Errors    uint64 // pool exhausted, journal or send failures
	// Reclaimed counts offers nobody REQUESTed that were taken back early
	// for a new client because the pool had no free address.
	Reclaimed uint64
	// Refused counts what the budgets turned away, by reason (the reason*
	// constants in budget.go); each is also logged once per client per
	// minute.
	Refused map[string]uint64
	// Packets counts the requests that parsed, by their message type and
	// the reply's (Reply "none": no answer), e.g. {discover offer}: 3.
	Packets map[PacketKind]uint64
}

// PacketKind is a request's DHCP message type and its reply's, in lower
// case ("discover", "offer"); "other" for a type outside RFC 2132's eight,
// "none" for no reply.
type PacketKind struct{ Type, Reply string }

type counters struct {
	received, malformed, ignored, offers, acks, naks, releases, declines, informs, errors atomic.Uint64
	// byType counts handled requests by message type (1-8, 0 other) and
	// reply type (0 none).
	byType [9][9]atomic.Uint64
}

// typeIndex maps a message type to its byType index (0 other).
func typeIndex(t dhcpv4.MessageType) int {
	if t >= 1 && t <= 8 {
		return int(t)
	}
	return 0
}

// typeName is a byType index's name.
func typeName(i int, zero string) string {
	if i == 0 {
		return zero
	}
	return strings.ToLower(dhcpv4.MessageType(i).String())
}

// Server is a DHCP server bound to its sockets; New binds, Serve serves.
type Server struct {
	mode     string
	cfg      *configs.DHCP
	addr     netip.Addr
	tftpAddr netip.Addr // next-server in boot replies
	ip       net.IP     // addr as net.IP
	mask     net.IPMask
	boot     booter
	hosts    *hosts.Table
	sink     event.Sink
	log      *slog.Logger
	leases   *leaseStore // full mode only
	conns    []*net.UDPConn
	proxy    *net.UDPConn // the 4011 socket in proxy mode
	workers  int
	port     uint16
	stats    counters
	closeOne sync.Once

	refuse     *refuse.Log
	newClients *rateBuckets // per relay
	sightings  *sightings
}

// New validates the options, loads the lease journal (full mode) and binds
// the sockets: port 67 (dhcp.port), and in proxy mode also 4011
// (dhcp.proxy_port). It fails on a busy port before anything runs.
func New(ctx context.Context, o Options) (*Server, error) {
	s, err := newServer(o)
	if err != nil {
		return nil, err
	}
	if err := s.listen(ctx, o.Iface); err != nil {
		s.closeAll()
		return nil, err
	}
	return s, nil
}

// newServer builds everything but the sockets; Handle works without them.
func newServer(o Options) (*Server, error) {
	if o.Config == nil || o.Hosts == nil {
		return nil, errors.New("dhcp.New: Config and Hosts are required")
	}
	cfg := &o.Config.DHCP
	if cfg.Mode != configs.ModeFull && cfg.Mode != configs.ModeProxy {
		return nil, fmt.Errorf("dhcp mode %q cannot be served; use full or proxy (off builds no server)", cfg.Mode)
	}
	if !o.Addr.Is4() {
		return nil, fmt.Errorf("server address %v is not IPv4; set --addr", o.Addr)
	}
	s := &Server{
		mode:     cfg.Mode,
		cfg:      cfg,
		addr:     o.Addr,
		tftpAddr: tftpServerAddr(o.Config, o.Addr),
		ip:       net.IP(o.Addr.AsSlice()),
		boot:     newBooter(cfg, o.Addr, o.Config.HTTP.Listen),
		hosts:    o.Hosts,
		sink:     o.Sink,
		log:      o.Logger,
		workers:  o.Workers,
		port:     uint16(cfg.Port),
	}
	if s.sink == nil {
		s.sink = event.Discard{}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.refuse = refuse.New(s.log, 0)
	s.newClients = newRateBuckets(orDefault(cfg.NewClientsPerSecond, defaultNewPerSecond))
	s.sightings = newSightings(orDefault(cfg.MaxSightings, defaultMaxSightings))
	if s.workers <= 0 {
		s.workers = 64
	}
	switch {
	case cfg.Netmask.IsValid():
		s.mask = net.IPMask(cfg.Netmask.AsSlice())
	case o.Prefix.IsValid() && o.Prefix.Addr().Is4():
		s.mask = net.CIDRMask(o.Prefix.Bits(), 32)
	default:
		s.mask = net.CIDRMask(24, 32)
		if cfg.Mode == configs.ModeFull {
			s.log.Warn("dhcp: interface has no prefix for the server address and dhcp.netmask is unset; handing out /24", "addr", o.Addr)
		}
	}
	if cfg.Mode == configs.ModeFull {
		if !cfg.Pool.IsValid() {
			return nil, errors.New("dhcp full mode needs dhcp.pool (e.g. --pool 192.168.50.100-192.168.50.200)")
		}
		s.leases = newLeaseStore(cfg.Pool, o.Addr, cfg.LeaseTime, o.Config.Hosts)
		s.leases.maxOffers = orDefault(cfg.MaxOffers, defaultMaxOffers)
		j, err := openJournal(o.Config.Data, s.leases, o.noSync, s.log)
		if err != nil {
			return nil, err
		}
		s.leases.j = j
	}
	return s, nil
}

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// listen binds port 67 (dhcp.port) and, in proxy mode, 4011 (dhcp.proxy_port).
func (s *Server) listen(ctx context.Context, iface string) error {
	cfg := s.cfg
	c, err := listenUDP(ctx, iface, cfg.Port)
	if err != nil {
		hint := "another DHCP server running? stop it, use --dhcp proxy, or --dhcp off"
		if cfg.Mode == configs.ModeProxy {
			hint = "another DHCP or proxyDHCP server (dnsmasq?) on this interface? stop it, or use --dhcp off"
		}
		return fmt.Errorf("dhcp: listening on port %d: %w (%s)", cfg.Port, err, hint)
	}
	// Absorb bursts (a rack powering on) while workers wait on fsync.
	_ = c.SetReadBuffer(4 << 20)
	s.conns = append(s.conns, c)
	if cfg.Mode == configs.ModeProxy {
		p, err := listenUDP(ctx, iface, cfg.ProxyPort)
		if err != nil {
			return fmt.Errorf("dhcp: listening on PXE port %d: %w (stop what holds it or use --dhcp off)", cfg.ProxyPort, err)
		}
		s.proxy = p
		s.conns = append(s.conns, p)
	}
	return nil
}

// Stats returns the packet counters.
func (s *Server) Stats() Stats {
	c := &s.stats
	st := Stats{
		Received: c.received.Load(), Malformed: c.malformed.Load(), Ignored: c.ignored.Load(),
		Offers: c.offers.Load(), Acks: c.acks.Load(), Naks: c.naks.Load(), Releases: c.releases.Load(),
		Declines: c.declines.Load(), Informs: c.informs.Load(), Errors: c.errors.Load(),
		Refused: s.refuse.Counts(), Packets: map[PacketKind]uint64{},
	}
	for i := range c.byType {
		for j := range c.byType[i] {
			if n := c.byType[i][j].Load(); n > 0 {
				st.Packets[PacketKind{typeName(i, "other"), typeName(j, "none")}] = n
			}
		}
	}
	if s.leases != nil {
		st.Reclaimed = s.leases.Reclaimed()
	}
	return st
}

// Leases lists the active leases (full mode; nil in proxy mode).
func (s *Server) Leases() []Lease {
	if s.leases == nil {
		return nil
	}
	return s.leases.Active(time.Now())
}

func (s *Server) closeAll() {
	s.closeOne.Do(func() {
		for _, c := range s.conns {
			_ = c.Close()
		}
		if s.leases != nil && s.leases.j != nil {
			_ = s.leases.j.close()
		}
	})
}

// Serve answers requests until ctx ends, then closes the sockets and
// returns nil.
func (s *Server) Serve(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, c := range s.conns {
		onProxy := c == s.proxy
		for range s.workers {
			wg.Go(func() { s.worker(c, onProxy) })
		}
	}
	<-ctx.Done()
	for _, c := range s.conns {
		_ = c.Close()
	}
	wg.Wait()
	s.closeAll()
	st := s.Stats()
	s.log.Info("dhcp stopped", "received", st.Received, "offers", st.Offers, "acks", st.Acks, "naks", st.Naks,
		"malformed", st.Malformed, "ignored", st.Ignored, "errors", st.Errors, "reclaimed", st.Reclaimed, "refused", st.Refused)
	return nil
}

func (s *Server) worker(c *net.UDPConn, onProxy bool) {
	buf := make([]byte, 1500) // reused for every packet this worker reads
	for {
		n, src, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Debug("dhcp: read", "err", err)
			continue
		}
		out, dst := s.handleSafe(buf[:n], src, onProxy)
		if out == nil {
			continue
		}
		if _, err := c.WriteToUDPAddrPort(out, dst); err != nil {
			s.stats.errors.Add(1)
			s.log.Warn("dhcp: send", "to", dst, "err", err)
		}
	}
}

// handleSafe is Handle with a last line of defence: a panic on some packet
// nobody thought of drops that packet, not the server. (FuzzHandle calls
// Handle directly, so such panics still surface there.)
func (s *Server) handleSafe(pkt []byte, src netip.AddrPort, onProxy bool) (out []byte, dst netip.AddrPort) {
	defer func() {
		if r := recover(); r != nil {
			s.stats.malformed.Add(1)
			s.log.Warn("dhcp: dropped a packet that crashed its handler", "from", src, "bytes", len(pkt), "panic", r)
			out = nil
		}
	}()
	return s.Handle(pkt, src, onProxy, time.Now())
}

// Handle answers one datagram from src: it returns the reply and where to
// send it, or nil. It is what the socket loop calls, and what FuzzHandle
// feeds. onProxy is true for the PXE port (4011).
func (s *Server) Handle(pkt []byte, src netip.AddrPort, onProxy bool, now time.Time) ([]byte, netip.AddrPort) {
	s.stats.received.Add(1)
	req, err := dhcpv4.FromBytes(pkt)
	if err == nil {
		err = checkRequest(req)
	}
	if err != nil {
		s.stats.malformed.Add(1)
		s.log.Debug("dhcp: dropped malformed packet", "from", src, "bytes", len(pkt), "err", err)
		return nil, netip.AddrPort{}
	}
	var r *dhcpv4.DHCPv4
	var dst netip.AddrPort
	if s.mode == configs.ModeProxy {
		r, dst = s.handleProxy(req, src, onProxy, now)
	} else {
		r, dst = s.handleFull(req, now)
	}
	reply := 0
	if r != nil {
		reply = typeIndex(r.MessageType())
	}
	s.stats.byType[typeIndex(req.MessageType())][reply].Add(1)
	if r == nil {
		return nil, netip.AddrPort{}
	}
	return msgTypeFirst(r.ToBytes()), dst
}

// msgTypeFirst moves option 53 to the front of the options (dhcpv4 sorts
// them by code). That is the order dnsmasq and ISC dhcpd send, which is
// what old PXE ROMs were tested against.
func msgTypeFirst(b []byte) []byte {
	const start = 240 // fixed header + magic cookie
	if len(b) <= start {
		return b
	}
	opts := b[start:]
	for i := 0; i < len(opts); {
		code := opts[i]
		switch code {
		case 0:
			i++
			continue
		case 255:
			return b
		}
		if i+1 >= len(opts) || i+2+int(opts[i+1]) > len(opts) {
			return b
		}
		n := 2 + int(opts[i+1])
		if code == 53 {
			tlv := append([]byte(nil), opts[i:i+n]...)
			copy(opts[n:i+n], opts[:i])
			copy(opts, tlv)
			return b
		}
		i += n
	}
	return b
}

// checkRequest rejects what no client would send.
func checkRequest(req *dhcpv4.DHCPv4) error {
	switch {
	case req.OpCode != dhcpv4.OpcodeBootRequest:
		return errors.New("not a BOOTREQUEST")
	case len(req.ClientHWAddr) == 0:
		return errors.New("no client hardware address")
	case req.MessageType() == dhcpv4.MessageTypeNone:
		return errors.New("no DHCP message type (plain BOOTP is not served)")
	}
	return nil
}

// reply starts a reply carrying what every reply to req carries.
func (s *Server) reply(req *dhcpv4.DHCPv4, mt dhcpv4.MessageType) *dhcpv4.DHCPv4 {
	r := &dhcpv4.DHCPv4{
		OpCode:        dhcpv4.OpcodeBootReply,
		HWType:        req.HWType,
		TransactionID: req.TransactionID,
		Flags:         req.Flags,
		ClientIPAddr:  net.IPv4zero,
		YourIPAddr:    net.IPv4zero,
		ServerIPAddr:  net.IPv4zero,
		GatewayIPAddr: req.GatewayIPAddr,
		ClientHWAddr:  req.ClientHWAddr,
		Options:       dhcpv4.Options{},
	}
	r.UpdateOption(dhcpv4.OptMessageType(mt))
	r.UpdateOption(dhcpv4.OptServerIdentifier(s.ip))
	for _, code := range []dhcpv4.OptionCode{dhcpv4.OptionRelayAgentInformation, dhcpv4.OptionClientIdentifier} {
		if v := req.Options.Get(code); v != nil {
			r.UpdateOption(dhcpv4.OptGeneric(code, v))
		}
	}
	return r
}

// network adds the configuration options of full mode.
func (s *Server) network(r *dhcpv4.DHCPv4) {
	r.UpdateOption(dhcpv4.OptSubnetMask(s.mask))
	if s.cfg.Router.IsValid() {
		r.UpdateOption(dhcpv4.OptRouter(net.IP(s.cfg.Router.AsSlice())))
	}
	if len(s.cfg.DNS) > 0 {
		ips := make([]net.IP, 0, len(s.cfg.DNS))
		for _, a := range s.cfg.DNS {
			ips = append(ips, net.IP(a.AsSlice()))
		}
		r.UpdateOption(dhcpv4.OptDNS(ips...))
	}
	if s.cfg.Domain != "" {
		r.UpdateOption(dhcpv4.OptDomainName(s.cfg.Domain))
	}
}

func (s *Server) leaseTimes(r *dhcpv4.DHCPv4, d time.Duration) {
	r.UpdateOption(dhcpv4.OptIPAddressLeaseTime(d))
	r.UpdateOption(dhcpv4.OptRenewTimeValue(d / 2))
	r.UpdateOption(dhcpv4.OptRebindingTimeValue(d * 7 / 8))
}

func (s *Server) dest(req, r *dhcpv4.DHCPv4, nak bool) netip.AddrPort {
	d := replyDest(ip4(req.GatewayIPAddr), ip4(req.ClientIPAddr), ip4(r.YourIPAddr), req.IsBroadcast(), nak, s.port, ClientPort)
	if d.SetBroadcast {
		r.SetBroadcast()
	}
	return d.To
}

func ip4(ip net.IP) netip.Addr {
	a, ok := netip.AddrFromSlice(ip.To4())
	if !ok {
		return netip.Addr{}
	}
	return a
}

func (s *Server) host(mac net.HardwareAddr) *configs.Host {
	h, _ := s.hosts.Host(mac)
	return h
}

func hostName(h *configs.Host) string {
	if h == nil {
		return ""
	}
	return h.Name
}

// handleFull serves full mode.
func (s *Server) handleFull(req *dhcpv4.DHCPv4, now time.Time) (*dhcpv4.DHCPv4, netip.AddrPort) {
	c := classify(req)
	host := s.host(c.MAC)
	log := clientLog{s.log, c.MAC, req.TransactionID}
	switch req.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		had := s.leases.Known(c.MAC)
		if host == nil && !had && !s.newClients.allow(relayKey(req), now) {
			s.refuse.Refuse(reasonNewClients, c.MAC.String(), "relay", relayKey(req), "per_second", s.newClients.rate,
				"fix", "raise dhcp.new_clients_per_second, or find what floods DISCOVERs")
			return nil, netip.AddrPort{}
		}
		addr, err := s.leases.Offer(c.MAC, ip4(req.RequestedIPAddress()), now, host != nil)
		switch {
		case errors.Is(err, ErrTooManyOffers):
			s.refuse.Refuse(reasonMaxOffers, c.MAC.String(), "max_offers", s.leases.maxOffers,
				"fix", "raise dhcp.max_offers, or find what floods DISCOVERs")
			return nil, netip.AddrPort{}
		case errors.Is(err, ErrPoolExhausted):
			s.stats.errors.Add(1)
			s.refuse.Refuse(reasonPoolExhausted, c.MAC.String(), "err", err)
			return nil, netip.AddrPort{}
		case err != nil:
			s.stats.errors.Add(1)
			log.Warn("dhcp: no address to offer", "err", err)
			return nil, netip.AddrPort{}
		}
		r := s.reply(req, dhcpv4.MessageTypeOffer)
		r.YourIPAddr = net.IP(addr.AsSlice())
		s.network(r)
		s.leaseTimes(r, s.cfg.LeaseTime)
		s.addBoot(r, req, c, host, false)
		s.stats.offers.Add(1)
		if host != nil || had {
			// New clients are remembered once ACKed: a DISCOVER flood must
			// not grow the hosts table.
			s.hosts.Observe(hosts.Client{MAC: c.MAC, Arch: c.Arch, IPXE: c.IPXE, Host: host})
		}
		log.Debug("dhcp: offer", "ip", addr, "arch", c.Arch, "ipxe", c.IPXE)
		return r, s.dest(req, r, false)

	case dhcpv4.MessageTypeRequest:
		sid := ip4(req.ServerIdentifier())
		if sid.IsValid() && sid != s.addr {
			s.leases.DropOffer(c.MAC) // the client took another server's offer
			s.stats.ignored.Add(1)
			return nil, netip.AddrPort{}
		}
		want := ip4(req.RequestedIPAddress())
		if !want.IsValid() {
			want = ip4(req.ClientIPAddr)
		}
		if !set(want) {
			s.stats.malformed.Add(1)
			log.Debug("dhcp: REQUEST names no address")
			return nil, netip.AddrPort{}
		}
		expiry, err := s.leases.Bind(c.MAC, want, sid.IsValid(), now)
		if errors.Is(err, errNotYours) {
			r := s.reply(req, dhcpv4.MessageTypeNak)
			r.UpdateOption(dhcpv4.OptMessage("address not available"))
			s.stats.naks.Add(1)
			log.Info("dhcp: nak", "ip", want)
			return r, s.dest(req, r, true)
		}
		if err != nil {
			s.stats.errors.Add(1)
			s.refuse.Refuse(reasonJournal, c.MAC.String(), "ip", want, "err", err,
				"then", "not acknowledged; the client retries and is ACKed once the disk takes writes again")
			return nil, netip.AddrPort{}
		}
		r := s.reply(req, dhcpv4.MessageTypeAck)
		r.YourIPAddr = net.IP(want.AsSlice())
		r.ClientIPAddr = req.ClientIPAddr
		s.network(r)
		s.leaseTimes(r, expiry.Sub(now))
		b := s.addBoot(r, req, c, host, false)
		s.stats.acks.Add(1)
		_, _, evicted := s.sightings.see(c.MAC, want.String(), now, func() bool { return true })
		s.forget(evicted)
		s.hosts.Observe(hosts.Client{MAC: c.MAC, Addr: want, Arch: c.Arch, IPXE: c.IPXE, Host: host, Seen: now})
		s.sink.Lease(&event.Lease{Time: now, MAC: c.MAC, Addr: want, Arch: c.Arch, Host: hostName(host),
			BootFile: b.File, Expiry: expiry})
		log.Debug("dhcp: ack", "ip", want, "boot_file", b.File)
		return r, s.dest(req, r, false)

	case dhcpv4.MessageTypeRelease:
		ok, err := s.leases.Release(c.MAC, ip4(req.ClientIPAddr), now)
		s.count(err, &s.stats.releases, ok)
		log.Debug("dhcp: release", "ip", ip4(req.ClientIPAddr), "known", ok, "err", err)
		return nil, netip.AddrPort{}

	case dhcpv4.MessageTypeDecline:
		addr := ip4(req.RequestedIPAddress())
		ok, err := s.leases.Decline(c.MAC, addr, now)
		s.count(err, &s.stats.declines, ok)
		log.Warn("dhcp: client declined its address (in use by someone else?)", "ip", addr, "known", ok)
		return nil, netip.AddrPort{}

	case dhcpv4.MessageTypeInform:
		r := s.reply(req, dhcpv4.MessageTypeAck)
		r.ClientIPAddr = req.ClientIPAddr
		s.network(r)
		s.addBoot(r, req, c, host, false)
		s.stats.informs.Add(1)
		return r, s.dest(req, r, false)
	}
	s.stats.ignored.Add(1)
	return nil, netip.AddrPort{}
}

func (s *Server) count(err error, c *atomic.Uint64, ok bool) {
	switch {
	case err != nil:
		s.stats.errors.Add(1)
		s.log.Error("dhcp: lease journal", "err", err)
	case ok:
		c.Add(1)
	default:
		s.stats.ignored.Add(1)
	}
}

func (s *Server) addBoot(r, req *dhcpv4.DHCPv4, c client, host *configs.Host, proxy bool) bootReply {
	b, ok := s.boot.decide(c, host, proxy)
	if ok {
		applyBoot(r, req, c, b, s.tftpAddr)
	}
	return b
}

// handleProxy serves proxy mode: on port 67 a DISCOVER from a boot client
// gets an OFFER without address; on 4011 a REQUEST (or INFORM) gets an ACK
// sent straight back to its source. Everything else is left to the
// network's DHCP server.
func (s *Server) handleProxy(req *dhcpv4.DHCPv4, src netip.AddrPort, onProxy bool, now time.Time) (*dhcpv4.DHCPv4, netip.AddrPort) {
	c := classify(req)
	host := s.host(c.MAC)
	mt := req.MessageType()
	var replyType dhcpv4.MessageType
	switch {
	case !onProxy && mt == dhcpv4.MessageTypeDiscover:
		replyType = dhcpv4.MessageTypeOffer
	case onProxy && (mt == dhcpv4.MessageTypeRequest || mt == dhcpv4.MessageTypeInform):
		replyType = dhcpv4.MessageTypeAck
	default:
		s.stats.ignored.Add(1)
		return nil, netip.AddrPort{}
	}
	b, ok := s.boot.decide(c, host, true)
	if !ok {
		s.stats.ignored.Add(1)
		s.log.Debug("dhcp: proxy ignores a client that is not a PXE/HTTP boot client", "client_mac", c.MAC.String(), "vendor", c.Vendor)
		return nil, netip.AddrPort{}
	}
	r := s.reply(req, replyType)
	applyBoot(r, req, c, b, s.tftpAddr)
	// A proxy OFFER must carry option 60 even for iPXE (PXE spec), which
	// decide already echoes from the request's class.
	var addr netip.Addr // unknown unless the client says (ciaddr on 4011)
	if a := ip4(req.ClientIPAddr); set(a) {
		addr = a
	}
	// Remember and record the client only when that says something new
	// (see sightings): a flood of spoofed DISCOVERs must grow neither the
	// hosts table nor the lease rows.
	told := fmt.Sprintf("%s|%d|%t|%s", b.File, c.Arch, c.IPXE, addr)
	record, admitted, evicted := s.sightings.see(c.MAC, told, now, func() bool {
		return host != nil || s.newClients.allow(relayKey(req), now)
	})
	s.forget(evicted)
	if !admitted {
		s.refuse.Refuse(reasonNotRecorded, c.MAC.String(), "relay", relayKey(req), "per_second", s.newClients.rate,
			"then", "answered, but not in the hosts table or the lease records")
	}
	if record {
		s.hosts.Observe(hosts.Client{MAC: c.MAC, Addr: addr, Arch: c.Arch, IPXE: c.IPXE, Host: host, Proxy: true, Seen: now})
		s.sink.Lease(&event.Lease{Time: now, MAC: c.MAC, Arch: c.Arch, Host: hostName(host), BootFile: b.File, Proxy: true})
	}
	s.log.Debug("dhcp: proxy answer", "client_mac", c.MAC.String(), "type", replyType.String(), "boot_file", b.File)
	if replyType == dhcpv4.MessageTypeOffer {
		s.stats.offers.Add(1)
		return r, s.dest(req, r, false)
	}
	s.stats.acks.Add(1)
	r.ClientIPAddr = req.ClientIPAddr
	dst := src
	if !set(src.Addr()) || src.Port() == 0 {
		dst = s.dest(req, r, false)
	}
	return r, dst
}

// forget drops a client the sightings let go from the hosts table.
func (s *Server) forget(mac net.HardwareAddr) {
	if mac != nil {
		s.hosts.Forget(mac)
	}
}

// relayKey is what new-client budgets are kept per: the relay (giaddr),
// or the zero address for clients on the served segment.
func relayKey(req *dhcpv4.DHCPv4) netip.Addr {
	if a := ip4(req.GatewayIPAddr); set(a) {
		return a
	}
	return netip.Addr{}
}

// clientLog adds client_mac and xid to a log line only when it is written
// (slog.Logger.With would allocate for every packet).
type clientLog struct {
	l   *slog.Logger
	mac net.HardwareAddr
	xid dhcpv4.TransactionID
}

func (c clientLog) log(level slog.Level, msg string, args ...any) {
	if !c.l.Enabled(context.Background(), level) {
		return
	}
	c.l.Log(context.Background(), level, msg, append([]any{"client_mac", c.mac.String(), "xid", c.xid.String()}, args...)...)
}

func (c clientLog) Debug(msg string, args ...any) { c.log(slog.LevelDebug, msg, args...) }
func (c clientLog) Info(msg string, args ...any)  { c.log(slog.LevelInfo, msg, args...) }
func (c clientLog) Warn(msg string, args ...any)  { c.log(slog.LevelWarn, msg, args...) }
func (c clientLog) Error(msg string, args ...any) { c.log(slog.LevelError, msg, args...) }
