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
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
	// Workers per socket where sockets are read through Go's poller (off
	// Linux); 0 means 64. Each owns one receive buffer. Many workers let
	// ACKs waiting on the journal's fsync share one flush. On Linux one
	// thread reads each socket and batches its ACKs (serveSock).
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
	// JournalFlushes counts the lease journal's writes, each fsynced
	// before the ACKs it carries leave: Acks over JournalFlushes is how
	// many ACKs shared a flush (group commit).
	JournalFlushes uint64
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
	dns      []netip.Addr // option 6 in full mode
	boot     booter
	options  configuredOptions // dhcp.options and dhcp.class_options
	hosts    *hosts.Table
	sink     event.Sink
	log      *slog.Logger
	leases   *leaseStore // full mode only
	conns    []*sock
	proxy    *sock // the 4011 socket in proxy mode
	workers  int
	port     uint16
	stats    counters
	closeOne sync.Once

	refuse     *refuse.Log
	newClients *rateBuckets // per trusted relay (dhcp.relays entry)
	sightings  *sightings
	relays     []netip.Prefix // dhcp.relays: the giaddrs answered
	prefix     netip.Prefix   // the served segment: replies there need ARP
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
		options:  newConfiguredOptions(cfg),
		hosts:    o.Hosts,
		sink:     o.Sink,
		log:      o.Logger,
		workers:  o.Workers,
		port:     uint16(cfg.Port),
		prefix:   o.Prefix.Masked(),
	}
	for _, r := range cfg.Relays {
		s.relays = append(s.relays, r.Prefix)
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
	for _, a := range cfg.DNS {
		s.dns = append(s.dns, a.Addr)
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

// sockRcvBuf is each socket's receive buffer: it absorbs bursts (a rack
// powering on) while the lease journal fsyncs.
const sockRcvBuf = 4 << 20

// listen binds port 67 (dhcp.port) and, in proxy mode, 4011 (dhcp.proxy_port).
func (s *Server) listen(ctx context.Context, iface string) error {
	cfg := s.cfg
	c, err := listenSock(ctx, iface, cfg.Port, sockRcvBuf)
	if err != nil {
		return fmt.Errorf("dhcp: listening on port %d: %w (%s)", cfg.Port, err, listenHint(err, cfg.Mode))
	}
	s.conns = append(s.conns, c)
	if cfg.Mode == configs.ModeProxy {
		p, err := listenSock(ctx, iface, cfg.ProxyPort, sockRcvBuf)
		if err != nil {
			return fmt.Errorf("dhcp: listening on PXE port %d: %w (%s)", cfg.ProxyPort, err, listenHint(err, cfg.Mode))
		}
		s.proxy = p
		s.conns = append(s.conns, p)
	}
	return nil
}

// listenHint says what to do about a DHCP socket that could not be bound:
// a refusal for want of privilege (EACCES, EPERM) needs root or the
// capabilities, a port in use (EADDRINUSE) another server stopped; only
// that one guesses at dnsmasq.
func listenHint(err error, mode string) string {
	switch {
	case errors.Is(err, fs.ErrPermission):
		return "needs root, or CAP_NET_BIND_SERVICE for a port below 1024 and CAP_NET_RAW for SO_BINDTODEVICE; or use --dhcp off"
	case errors.Is(err, syscall.EADDRINUSE) && mode == configs.ModeProxy:
		return "another DHCP or proxyDHCP server (dnsmasq?) holds the port on this host: stop it, or use --dhcp off"
	case errors.Is(err, syscall.EADDRINUSE):
		return "another DHCP server holds the port on this host: stop it, use --dhcp proxy, or --dhcp off"
	default:
		return "use --dhcp off to serve without DHCP"
	}
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
		if s.leases.j != nil {
			st.JournalFlushes = s.leases.j.flushes.Load()
		}
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
			c.closeNeighbours()
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
		wg.Go(func() { s.serveSock(c, onProxy) })
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

// handleSafe is Handle with a last line of defence: a panic on some packet
// nobody thought of drops that packet, not the server. (FuzzHandle calls
// Handle directly, so such panics still surface there.)
func (s *Server) handleSafe(w *wire, pkt []byte, src netip.AddrPort, onProxy bool) (out []byte, dst netip.AddrPort) {
	defer func() {
		if r := recover(); r != nil {
			s.stats.malformed.Add(1)
			s.log.Warn("dhcp: dropped a packet that crashed its handler", "from", src, "bytes", len(pkt), "panic", r)
			out = nil
		}
	}()
	return s.handle(w, pkt, src, onProxy, time.Now())
}

// Handle answers one datagram from src: it returns the reply and where to
// send it, or nil. It is the request path the socket loop runs (with its
// own buffers), and what FuzzHandle feeds; an ACK is returned once its
// lease is durable, as the loop sends it. onProxy is true for the PXE port
// (4011).
func (s *Server) Handle(pkt []byte, src netip.AddrPort, onProxy bool, now time.Time) ([]byte, netip.AddrPort) {
	w := &wire{}
	out, dst := s.handle(w, pkt, src, onProxy, now)
	if out == nil || w.ack.pending && !s.settle(&w.ack, s.leases.wait(w.ack.gen)) {
		return nil, netip.AddrPort{}
	}
	return out, dst
}

// wire is a worker's parsed request, reply and output buffer, reused for
// every packet it handles.
type wire struct {
	req msg
	rep reply
	out []byte
	ack ackAfter // when the reply is an ACK of full mode
}

// ackAfter is an ACK of full mode waiting for its lease record: the ACK
// may leave only once the journal has fsynced generation gen. settle then
// counts it, tells the hosts table and records the lease.
type ackAfter struct {
	pending bool
	gen     uint64
	c       client // c.MAC is the request's own copy
	host    *configs.Host
	addr    netip.Addr
	expiry  time.Time
	file    string // the boot file the ACK names
	now     time.Time
	xid     dhcpv4.TransactionID
}

// settle ends an ACK whose lease record's write returned err (nil: it is
// durable) and reports whether the ACK may be sent.
func (s *Server) settle(a *ackAfter, err error) bool {
	a.pending = false
	c := a.c
	if err != nil {
		s.stats.errors.Add(1)
		// One key for all clients: a full disk fails every write, and a log
		// line per forged MAC a minute would be a flood of its own.
		s.refuse.Refuse(reasonJournal, "journal", "client_mac", c.MAC.String(), "ip", a.addr, "err", err,
			"then", "not acknowledged; the client retries and is ACKed once the disk takes writes again")
		return false
	}
	s.stats.acks.Add(1)
	// A lease record when the client is new or what it was told changed,
	// else at most once a minute (sightingEvery), as in proxy mode: a
	// renewal is durable in the lease journal already, and the record
	// store is no place to pay a row per renewal (perfdhcp's clients
	// renew many times a second).
	record, _, evicted := s.sightings.see(c.MAC, told(a.file, c, a.addr), a.now, func() bool { return true })
	s.forget(evicted)
	s.hosts.Observe(hosts.Client{MAC: c.MAC, Addr: a.addr, Arch: c.Arch, IPXE: c.IPXE, UBoot: c.UBoot, Serial: c.serial(), Host: a.host, Seen: a.now})
	if record {
		s.sink.Lease(&event.Lease{Time: a.now, MAC: c.MAC, Addr: a.addr, Arch: c.Arch, Host: hostName(a.host),
			BootFile: a.file, Expiry: a.expiry})
	}
	clientLog{s.log, c.MAC, a.xid}.Debug("dhcp: ack", "ip", a.addr, "boot_file", a.file)
	return true
}

// settleSafe is settle with handleSafe's last line of defence: a panic in
// the bookkeeping of one ACK drops that ACK (its lease is durable; the
// client asks again), not the server.
func (s *Server) settleSafe(a *ackAfter, err error) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			s.stats.errors.Add(1)
			s.log.Warn("dhcp: dropped an ACK whose bookkeeping crashed", "client_mac", a.c.MAC.String(), "panic", r)
			ok = false
		}
	}()
	return s.settle(a, err)
}

// handle answers pkt; the reply it returns is w.out, valid until w's next
// packet.
func (s *Server) handle(w *wire, pkt []byte, src netip.AddrPort, onProxy bool, now time.Time) ([]byte, netip.AddrPort) {
	w.ack.pending = false
	s.stats.received.Add(1)
	req := &w.req
	if err := req.parse(pkt); err != nil {
		s.stats.malformed.Add(1)
		s.log.Debug("dhcp: dropped malformed packet", "from", src, "bytes", len(pkt), "err", err)
		return nil, netip.AddrPort{}
	}
	// giaddr is where the reply goes: from an untrusted relay it would aim
	// our replies at any address the sender names (and, on the segment, at
	// addresses that answer no ARP), so only dhcp.relays are answered.
	if set(req.giaddr) && !s.relayKey(req).IsValid() {
		s.refuse.Refuse(reasonUntrustedRelay, "giaddr", "giaddr", req.giaddr, "from", src,
			"fix", "add the relay's giaddr (or its prefix) to dhcp.relays, or find who forges giaddr")
		return nil, netip.AddrPort{}
	}
	var ok bool
	var dst netip.AddrPort
	if s.mode == configs.ModeProxy {
		ok, dst = s.handleProxy(req, &w.rep, src, onProxy, now)
	} else {
		ok, dst = s.handleFull(req, &w.rep, &w.ack, now)
	}
	reply := 0
	if ok {
		reply = typeIndex(w.rep.mt)
	}
	s.stats.byType[typeIndex(req.mt)][reply].Add(1)
	if !ok {
		return nil, netip.AddrPort{}
	}
	w.out = w.rep.appendTo(w.out[:0])
	if n := w.rep.dropped; n > 0 {
		s.refuse.Refuse(reasonOptionsDropped, req.chaddr.String(), "dropped", n, "max_message", w.rep.limit+ipUDPHeaders,
			"fix", "the reply would be longer than the client takes (option 57, else 576 bytes): configure fewer or shorter options for it")
	}
	return w.out, dst
}

// start begins a reply of type mt to req with what every reply carries.
func (s *Server) start(r *reply, req *msg, mt dhcpv4.MessageType) {
	r.start(req, mt, s.addr)
}

// network adds the configuration options of full mode.
func (s *Server) network(r *reply) {
	r.set(optSubnetMask, s.mask)
	if s.cfg.Router.IsValid() {
		r.setIP(optRouter, s.cfg.Router.Addr)
	}
	if len(s.dns) > 0 {
		r.setIPs(optDNS, s.dns)
	}
	if s.cfg.Domain != "" {
		r.setString(optDomainName, s.cfg.Domain)
	}
}

func (s *Server) leaseTimes(r *reply, d time.Duration) {
	r.setSeconds(optLeaseTime, d)
	r.setSeconds(optRenewal, d/2)
	r.setSeconds(optRebinding, d*7/8)
}

func (s *Server) dest(req *msg, r *reply, nak bool) netip.AddrPort {
	d := replyDest(req.giaddr, req.ciaddr, r.yiaddr, req.broadcast(), nak, s.port, ClientPort)
	if d.SetBroadcast {
		r.setBroadcast()
	}
	return d.To
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

// handleFull serves full mode: DISCOVER (offerFull), REQUEST
// (requestFull), RELEASE, DECLINE and INFORM, each a step of its own.
// It builds the reply in r and reports whether there is one. An ACK also
// fills ack: it may leave only once settle says its lease is durable.
func (s *Server) handleFull(req *msg, r *reply, ack *ackAfter, now time.Time) (bool, netip.AddrPort) {
	c := classify(req)
	f := &fullRequest{req: req, r: r, c: c, host: s.host(c.MAC), log: clientLog{s.log, c.MAC, req.xid}, now: now}
	switch req.mt {
	case dhcpv4.MessageTypeDiscover:
		return s.offerFull(f)
	case dhcpv4.MessageTypeRequest:
		return s.requestFull(f, ack)
	case dhcpv4.MessageTypeRelease:
		s.releaseFull(f)
	case dhcpv4.MessageTypeDecline:
		s.declineFull(f)
	case dhcpv4.MessageTypeInform:
		return s.informFull(f)
	default:
		s.stats.ignored.Add(1)
	}
	return false, netip.AddrPort{}
}

// fullRequest is the request handleFull's steps serve: the client it
// classified, its host entry (nil: none) and the reply under way.
type fullRequest struct {
	req  *msg
	r    *reply
	c    client
	host *configs.Host
	log  clientLog
	now  time.Time
}

// offerFull answers a DISCOVER with an OFFER of the address offerAddr
// picks.
func (s *Server) offerFull(f *fullRequest) (bool, netip.AddrPort) {
	req, r, c, host := f.req, f.r, f.c, f.host
	had := s.leases.Known(c.MAC)
	addr, ok := s.offerAddr(f, had)
	if !ok {
		return false, netip.AddrPort{}
	}
	s.start(r, req, dhcpv4.MessageTypeOffer)
	r.yiaddr = addr
	s.network(r)
	s.leaseTimes(r, s.cfg.LeaseTime)
	s.addBoot(r, req, c, host, false)
	s.addOptions(r, req, c, host, false)
	s.stats.offers.Add(1)
	if host != nil || had {
		// New clients are remembered once ACKed: a DISCOVER flood must
		// not grow the hosts table.
		s.hosts.Observe(hosts.Client{MAC: c.MAC, Arch: c.Arch, IPXE: c.IPXE, UBoot: c.UBoot, Serial: c.serial(), Host: host})
	}
	f.log.Debug("dhcp: offer", "ip", addr, "arch", c.Arch, "ipxe", c.IPXE)
	return true, s.dest(req, r, false)
}

// offerAddr picks the address to offer, unless the client is new (had:
// it has a lease) beyond the new-client budget or the pool or the offers
// held are exhausted: each refusal is counted.
func (s *Server) offerAddr(f *fullRequest, had bool) (netip.Addr, bool) {
	req, mac := f.req, f.c.MAC
	if f.host == nil && !had && !s.newClients.allow(s.relayKey(req), f.now) {
		s.refuse.Refuse(reasonNewClients, mac.String(), "relay", s.relayKey(req), "per_second", s.newClients.rate,
			"fix", "raise dhcp.new_clients_per_second, or find what floods DISCOVERs")
		return netip.Addr{}, false
	}
	addr, err := s.leases.Offer(mac, req.requestedIP(), f.now, f.host != nil)
	switch {
	case errors.Is(err, ErrTooManyOffers):
		s.refuse.Refuse(reasonMaxOffers, mac.String(), "max_offers", s.leases.maxOffers,
			"fix", "raise dhcp.max_offers, or find what floods DISCOVERs")
		return netip.Addr{}, false
	case errors.Is(err, ErrPoolExhausted):
		s.stats.errors.Add(1)
		s.refuse.Refuse(reasonPoolExhausted, mac.String(), "err", err)
		return netip.Addr{}, false
	case err != nil:
		s.stats.errors.Add(1)
		f.log.Warn("dhcp: no address to offer", "err", err)
		return netip.Addr{}, false
	}
	return addr, true
}

// requestFull answers a REQUEST for the address requestedAddr names: an
// ACK whose lease is bound (it leaves once durable, see ack), or a NAK when
// the address is another's.
func (s *Server) requestFull(f *fullRequest, ack *ackAfter) (bool, netip.AddrPort) {
	req, r, c, host, now := f.req, f.r, f.c, f.host, f.now
	want, ok := s.requestedAddr(f)
	if !ok {
		return false, netip.AddrPort{}
	}
	expiry, gen, err := s.leases.bind(c.MAC, want, req.serverID().IsValid(), now)
	if errors.Is(err, errNotYours) {
		s.start(r, req, dhcpv4.MessageTypeNak)
		r.setString(optMessage, "address not available")
		s.stats.naks.Add(1)
		// Debug: forged REQUESTs would write a line each; NAKs are
		// counted (dhcp_packets_total{outcome="nak"}).
		f.log.Debug("dhcp: nak", "ip", want)
		return true, s.dest(req, r, true)
	}
	s.start(r, req, dhcpv4.MessageTypeAck)
	r.yiaddr = want
	r.ciaddr = req.ciaddr
	s.network(r)
	s.leaseTimes(r, expiry.Sub(now))
	b := s.addBoot(r, req, c, host, false)
	if f := s.addOptions(r, req, c, host, false); f != "" {
		b.File = f
	}
	*ack = ackAfter{pending: true, gen: gen, c: c, host: host, addr: want, expiry: expiry, file: b.File, now: now, xid: req.xid}
	return true, s.dest(req, r, false)
}

// requestedAddr is the address a REQUEST asks for (option 50, else
// ciaddr), unless it took another server's offer, names none, or comes
// from an unknown client unknownRequest turns away.
func (s *Server) requestedAddr(f *fullRequest) (netip.Addr, bool) {
	req, mac := f.req, f.c.MAC
	sid := req.serverID()
	if sid.IsValid() && sid != s.addr {
		s.leases.DropOffer(mac) // the client took another server's offer
		s.stats.ignored.Add(1)
		return netip.Addr{}, false
	}
	want := req.requestedIP()
	if !want.IsValid() {
		want = req.ciaddr
	}
	if !set(want) {
		s.stats.malformed.Add(1)
		f.log.Debug("dhcp: REQUEST names no address")
		return netip.Addr{}, false
	}
	if !sid.IsValid() && f.host == nil && !s.leases.Known(mac) && !s.unknownRequest(req, f.c, want, f.now) {
		return netip.Addr{}, false
	}
	return want, true
}

// releaseFull frees the client's lease (RELEASE: no reply).
func (s *Server) releaseFull(f *fullRequest) {
	ok, err := s.leases.Release(f.c.MAC, f.req.ciaddr, f.now)
	s.count(err, &s.stats.releases, ok)
	f.log.Debug("dhcp: release", "ip", f.req.ciaddr, "known", ok, "err", err)
}

// declineFull takes an address the client found in use out of the pool
// (DECLINE: no reply).
func (s *Server) declineFull(f *fullRequest) {
	addr := f.req.requestedIP()
	ok, err := s.leases.Decline(f.c.MAC, addr, f.now)
	s.count(err, &s.stats.declines, ok)
	if ok { // one that names no binding of its own changes nothing: no line per forged DECLINE
		f.log.Warn("dhcp: client declined its address (in use by someone else?)", "ip", addr)
	}
}

// informFull answers an INFORM with the network and boot options, no
// address.
func (s *Server) informFull(f *fullRequest) (bool, netip.AddrPort) {
	s.start(f.r, f.req, dhcpv4.MessageTypeAck)
	f.r.ciaddr = f.req.ciaddr
	s.network(f.r)
	s.addBoot(f.r, f.req, f.c, f.host, false)
	s.addOptions(f.r, f.req, f.c, f.host, false)
	s.stats.informs.Add(1)
	return true, s.dest(f.req, f.r, false)
}

// unknownRequest decides a REQUEST without server identifier from a
// client with no binding, no reservation and no host entry (a forged MAC
// costs nothing, so each could take an address for a whole lease):
//   - INIT-REBOOT (requested address, no ciaddr) is answered only with a
//     NAK when the address is not on the served network; otherwise the
//     server stays silent, as RFC 2131 4.3.2 says a server with no record
//     of the client MUST (and Kea does unless authoritative). The client
//     falls back to DISCOVER, which the new-client budget charges.
//   - RENEWING or REBINDING (ciaddr set) is confirmed as before, so a
//     client keeps its address after the lease journal was lost, but it
//     is charged to the new-client budget like a DISCOVER.
//
// It reports whether to go on and bind.
func (s *Server) unknownRequest(req *msg, c client, want netip.Addr, now time.Time) bool {
	if !set(req.ciaddr) {
		if !s.onNetwork(want) {
			return true // bind refuses it: a NAK, as RFC 2131 asks for a wrong network
		}
		s.stats.ignored.Add(1)
		// Logged per relay, what the sender cannot choose: forged MACs
		// would each get a line.
		s.refuse.Refuse(reasonUnknownReboot, s.relayKey(req).String(), "client_mac", c.MAC.String(), "ip", want,
			"then", "silent (RFC 2131 4.3.2); the client falls back to DISCOVER")
		return false
	}
	if !s.newClients.allow(s.relayKey(req), now) {
		s.refuse.Refuse(reasonNewClients, c.MAC.String(), "relay", s.relayKey(req), "per_second", s.newClients.rate,
			"fix", "raise dhcp.new_clients_per_second, or find what floods REQUESTs")
		return false
	}
	return true
}

// isRelay reports whether a is in dhcp.relays.
func (s *Server) isRelay(a netip.Addr) bool {
	for _, r := range s.relays {
		if r.Contains(a) {
			return true
		}
	}
	return false
}

// onNetwork reports whether a is on the segment the pool serves.
func (s *Server) onNetwork(a netip.Addr) bool {
	if !a.Is4() {
		return false
	}
	ones, _ := s.mask.Size()
	return netip.PrefixFrom(a, ones).Masked() == netip.PrefixFrom(s.addr, ones).Masked()
}

func (s *Server) count(err error, c *atomic.Uint64, ok bool) {
	switch {
	case err != nil:
		s.stats.errors.Add(1)
		s.refuse.Refuse(reasonJournal, "journal", "err", err)
	case ok:
		c.Add(1)
	default:
		s.stats.ignored.Add(1)
	}
}

func (s *Server) addBoot(r *reply, req *msg, c client, host *configs.Host, proxy bool) bootReply {
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
func (s *Server) handleProxy(req *msg, r *reply, src netip.AddrPort, onProxy bool, now time.Time) (bool, netip.AddrPort) {
	c := classify(req)
	host := s.host(c.MAC)
	mt := req.mt
	var replyType dhcpv4.MessageType
	switch {
	case !onProxy && mt == dhcpv4.MessageTypeDiscover:
		replyType = dhcpv4.MessageTypeOffer
	case onProxy && (mt == dhcpv4.MessageTypeRequest || mt == dhcpv4.MessageTypeInform):
		replyType = dhcpv4.MessageTypeAck
	default:
		s.stats.ignored.Add(1)
		return false, netip.AddrPort{}
	}
	b, ok := s.boot.decide(c, host, true)
	if !ok {
		s.stats.ignored.Add(1)
		s.log.Debug("dhcp: proxy ignores a client that is not a PXE/HTTP boot client", "client_mac", c.MAC.String(), "vendor", c.Vendor)
		return false, netip.AddrPort{}
	}
	s.start(r, req, replyType)
	applyBoot(r, req, c, b, s.tftpAddr)
	if f := s.addOptions(r, req, c, host, true); f != "" {
		b.File = f
	}
	// A proxy OFFER must carry option 60 even for iPXE (PXE spec), which
	// decide already echoes from the request's class.
	var addr netip.Addr // unknown unless the client says (ciaddr on 4011)
	if set(req.ciaddr) {
		addr = req.ciaddr
	}
	// Remember and record the client only when that says something new
	// (see sightings): a flood of spoofed DISCOVERs must grow neither the
	// hosts table nor the lease rows.
	record, admitted, evicted := s.sightings.see(c.MAC, told(b.File, c, addr), now, func() bool {
		return host != nil || s.newClients.allow(s.relayKey(req), now)
	})
	s.forget(evicted)
	if !admitted {
		s.refuse.Refuse(reasonNotRecorded, c.MAC.String(), "relay", s.relayKey(req), "per_second", s.newClients.rate,
			"then", "answered, but not in the hosts table or the lease records")
	}
	if record {
		s.hosts.Observe(hosts.Client{MAC: c.MAC, Addr: addr, Arch: c.Arch, IPXE: c.IPXE, UBoot: c.UBoot, Serial: c.serial(), Host: host, Proxy: true, Seen: now})
		s.sink.Lease(&event.Lease{Time: now, MAC: c.MAC, Arch: c.Arch, Host: hostName(host), BootFile: b.File, Proxy: true})
	}
	s.log.Debug("dhcp: proxy answer", "client_mac", c.MAC.String(), "type", replyType.String(), "boot_file", b.File)
	if replyType == dhcpv4.MessageTypeOffer {
		s.stats.offers.Add(1)
		return true, s.dest(req, r, false)
	}
	s.stats.acks.Add(1)
	r.ciaddr = req.ciaddr
	dst := src
	if !set(src.Addr()) || src.Port() == 0 {
		dst = s.dest(req, r, false)
	}
	return true, dst
}

// told is what a sighting compares: what the client was told.
func told(file string, c client, addr netip.Addr) string {
	return fmt.Sprintf("%s|%d|%t|%s", file, c.Arch, c.IPXE, addr)
}

// forget drops a client the sightings let go from the hosts table.
func (s *Server) forget(mac net.HardwareAddr) {
	if mac != nil {
		s.hosts.Forget(mac)
	}
}

// relayKey is what new-client budgets are kept per, what a client cannot
// choose: the dhcp.relays entry its giaddr falls in (its address, a
// prefix's first), 0.0.0.0 for clients on the served segment, and the
// invalid address for a giaddr no entry trusts.
func (s *Server) relayKey(req *msg) netip.Addr {
	if !set(req.giaddr) {
		return netip.IPv4Unspecified()
	}
	for _, r := range s.relays {
		if r.Contains(req.giaddr) {
			return r.Addr()
		}
	}
	return netip.Addr{} // isRelay(giaddr) is false
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
