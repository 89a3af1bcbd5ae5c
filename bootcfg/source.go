package bootcfg

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"text/template"
	"time"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/images"
)

// Loaders lists the families Source generates configs for, in the order
// messages list them.
var Loaders = []Loader{PXELinux, GRUB, UBoot}

// Source is the one lookup TFTP and HTTP share: a file in the root always
// wins; a name that is not in the root but is a loader config (Match) is
// generated for the client from its host entry and the templates. Build it
// with New, which parses every template first, so a broken one fails at
// start and not when a board boots. Safe for concurrent use.
type Source struct {
	images *images.Store
	hosts  *hosts.Table
	server netip.Addr
	base   string // http://ADDR[:PORT], "" without HTTP
	// set is the parsed templates; nil for RootOnly. Reload swaps it
	// whole, so a request sees the old set or the new one, never a mix.
	set atomic.Pointer[templateSet]
	log *slog.Logger
}

// templateSet is every parsed template of one configuration.
type templateSet struct {
	global  map[Loader]*template.Template
	perHost map[string]map[Loader]*template.Template // by MAC string
	custom  map[Loader]bool                          // a global template is configured
	mtime   time.Time
}

// Options build a Source.
type Options struct {
	// Config gives the host entries and templates; nil: root files only.
	Config *configs.Config
	Images *images.Store // required
	// Hosts finds a client's host entry by MAC or leased address; nil: a
	// table of Config's hosts.
	Hosts *hosts.Table
	// Server is the address boards reach pxeperf at (.Server); a request's
	// own local address wins when the caller knows it.
	Server netip.Addr
	// HTTPBase is http://ADDR[:PORT] for .ServerURL and url; "" when HTTP
	// is off.
	HTTPBase string
	Logger   *slog.Logger
}

// RootOnly is a Source that serves the root and generates nothing (tests,
// the bench).
func RootOnly(store *images.Store) *Source {
	return &Source{images: store, log: slog.New(slog.DiscardHandler)}
}

// New parses every configured template (global and per host; "@file" ones
// from the root) and the built-ins. All template errors are returned
// together, each naming the config key, the line and the fix.
func New(o Options) (*Source, error) {
	if o.Images == nil {
		return nil, errors.New("bootcfg: no image store")
	}
	s := &Source{
		images: o.Images, hosts: o.Hosts, server: o.Server, base: strings.TrimRight(o.HTTPBase, "/"),
		log: o.Logger,
	}
	ts := &templateSet{
		global: map[Loader]*template.Template{}, perHost: map[string]map[Loader]*template.Template{},
		custom: map[Loader]bool{}, mtime: time.Now(),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	cfg := o.Config
	if cfg == nil {
		cfg = &configs.Config{}
	}
	if s.hosts == nil {
		s.hosts = hosts.New(cfg.Hosts)
	}
	var errs []error
	for _, l := range Loaders {
		t, err := s.parse(l, "templates."+string(l), cfg.File, templateOf(cfg.Templates, l))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ts.custom[l] = t != nil
		if t == nil {
			if t, err = Parse(l, "built-in "+string(l)+" template", 0, Builtin(l)); err != nil {
				errs = append(errs, err) // a bug in this package
				continue
			}
		}
		ts.global[l] = t
	}
	for i := range cfg.Hosts {
		h := &cfg.Hosts[i]
		name := h.Name
		if name == "" {
			name = fmt.Sprint(i)
		}
		for _, l := range Loaders {
			t, err := s.parse(l, "hosts["+name+"].templates."+string(l), cfg.File, templateOf(h.Templates, l))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if t == nil {
				continue
			}
			key := h.MAC.String()
			if ts.perHost[key] == nil {
				ts.perHost[key] = map[Loader]*template.Template{}
			}
			ts.perHost[key][l] = t
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s.set.Store(ts)
	return s, nil
}

// Reload parses the templates of o.Config as New does (o.Images nil: this
// Source's store) and, when every one parses, swaps them in at once:
// transfers already running keep what they rendered, later requests get
// the new set. On an error nothing changes and the error says what to fix.
// The hosts table is not replaced here; see hosts.Table.Replace.
func (s *Source) Reload(o Options) error {
	if o.Images == nil {
		o.Images = s.images
	}
	if o.Hosts == nil {
		o.Hosts = s.hosts
	}
	n, err := New(o)
	if err != nil {
		return err
	}
	s.set.Store(n.set.Load())
	return nil
}

func templateOf(ts configs.Templates, l Loader) configs.Template {
	switch l {
	case PXELinux:
		return ts.PXELinux
	case GRUB:
		return ts.GRUB
	default:
		return ts.UBoot
	}
}

// parse parses one configured template; nil when none is set. "@file"
// reads the template from the root.
func (s *Source) parse(l Loader, key, file string, t configs.Template) (*template.Template, error) {
	if strings.TrimSpace(t.Text) == "" {
		return nil, nil
	}
	name, fromFile := strings.CutPrefix(strings.TrimSpace(t.Text), "@")
	if !fromFile {
		return ParseIn(l, key, file, t.Line, t.Text)
	}
	text, err := ReadTemplate(s.images, name)
	if err != nil {
		return nil, fmt.Errorf("%s: reading the template @%s from the root: %w (put the file in the root, or write the template inline)", key, name, err)
	}
	return ParseIn(l, key+" (@"+name+")", "", 0, text)
}

// ReadTemplate reads an "@file" template from the root (at most 1 MiB):
// the loader templates here and the iPXE scripts in httpboot alike.
func ReadTemplate(store *images.Store, name string) (string, error) {
	f, _, err := store.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	return string(b), err
}

// Content is what a client gets for a name: a file from the root (File,
// for sendfile), or a config generated for it (Data).
type Content struct {
	File   *os.File // nil when generated
	Data   []byte
	Size   int64
	Loader Loader        // "" for a file from the root
	Host   *configs.Host // the host the config was generated for, if any
	MAC    net.HardwareAddr
	r      *bytes.Reader
}

// Generated reports whether the content was generated, not read from the
// root.
func (c *Content) Generated() bool { return c.Loader != "" }

// Reader returns the content to read or seek from the start.
func (c *Content) Reader() io.ReadSeeker {
	if c.File != nil {
		return c.File
	}
	if c.r == nil {
		c.r = bytes.NewReader(c.Data)
	}
	return c.r
}

// Read reads the content (io.Reader for TFTP).
func (c *Content) Read(p []byte) (int, error) { return c.Reader().Read(p) }

// Close closes the file from the root, if any.
func (c *Content) Close() error {
	if c.File != nil {
		return c.File.Close()
	}
	return nil
}

// Peer is who asks: the client's address, and the local address and HTTP
// base URL it reached pxeperf at (zero: the Source's defaults).
type Peer struct {
	Client    netip.Addr
	Local     netip.Addr
	ServerURL string
}

// Open returns what peer gets for name. A file in the root always wins.
// Otherwise a loader config name (Match) is generated for the client: by
// the MAC in the name, else by the address in the name (a whole hex IP),
// else by the asking address's DHCP lease. pxelinux and GRUB configs exist
// for clients whose host entry has a kernel or for which a template is
// configured, or whose entry has a default_boot (local, shell); a U-Boot
// script exists for every client (without a kernel or default_boot it says
// what to configure). Anything else is fs.ErrNotExist, so a loader
// moves on to the next name of its chain.
func (s *Source) Open(name string, peer Peer) (*Content, error) {
	client := ""
	if peer.Client.IsValid() {
		client = peer.Client.String()
	}
	f, size, err := s.images.OpenFor(name, client)
	if errors.Is(err, fs.ErrNotExist) {
		if rest, ok := rpiFallback(s.images.Dir(), name); ok {
			f, size, err = s.images.OpenFor(rest, client) // see rpiFallback
		}
	}
	if err == nil {
		return &Content{File: f, Size: size}, nil
	}
	ts := s.set.Load()
	if !errors.Is(err, fs.ErrNotExist) || ts == nil {
		return nil, err
	}
	req, ok := Match(name)
	if !ok {
		return nil, err
	}
	c, known := s.client(req, peer.Client)
	host := c.Host
	tmpl := ts.perHost[macKey(c.MAC)][req.Loader]
	if tmpl == nil && !ts.custom[req.Loader] && req.Loader != UBoot && !generates(host) {
		return nil, fmt.Errorf("%s: %w (no file in the root, and no host entry with a kernel, default_boot or template to generate it from)", name, fs.ErrNotExist)
	}
	if tmpl == nil {
		tmpl = ts.global[req.Loader]
	}
	d := s.data(c, known, peer)
	b, rerr := Render(req.Loader, tmpl, d, ts.mtime)
	if rerr != nil {
		return nil, rerr
	}
	return &Content{Data: b, Size: int64(len(b)), Loader: req.Loader, Host: host, MAC: c.MAC}, nil
}

// generates reports whether the built-in pxelinux and GRUB templates have
// something to say to host: a kernel to boot, or a default_boot (local,
// shell) to carry out. Without either a loader is better served by "File
// not found", which moves it on to the next name of its chain.
func generates(host *configs.Host) bool {
	return host != nil && (host.Kernel != "" || host.DefaultBoot != "")
}

// client finds whom a request is for.
func (s *Source) client(req Request, from netip.Addr) (hosts.Client, bool) {
	if req.MAC != nil {
		if c, ok := s.hosts.ByMAC(req.MAC); ok {
			return c, true
		}
		return hosts.Client{MAC: req.MAC, Arch: configs.ArchUnknown}, false
	}
	if len(req.IPHex) == 8 {
		var b [4]byte
		if _, err := fmt.Sscanf(req.IPHex, "%02X%02X%02X%02X", &b[0], &b[1], &b[2], &b[3]); err == nil {
			if c, ok := s.hosts.ByAddr(netip.AddrFrom4(b)); ok {
				return c, true
			}
		}
	}
	if from.IsValid() {
		if c, ok := s.hosts.ByAddr(from.Unmap()); ok {
			return c, true
		}
	}
	return hosts.Client{Addr: from, Arch: configs.ArchUnknown}, false
}

func macKey(mac net.HardwareAddr) string {
	if mac == nil {
		return ""
	}
	return mac.String()
}

// data fills what a template sees.
func (s *Source) data(c hosts.Client, known bool, peer Peer) Data {
	d := Data{ServerURL: s.base}
	if c.MAC != nil {
		d.MAC = c.MAC.String()
	}
	switch {
	case known && c.Addr.IsValid():
		d.IP = c.Addr.String()
	case peer.Client.IsValid():
		d.IP = peer.Client.Unmap().String()
	}
	if a, ok := configs.ArchByCode(c.Arch); ok {
		d.Arch = a.Name
	}
	server := s.server
	if peer.Local.IsValid() && !peer.Local.IsUnspecified() {
		server = peer.Local.Unmap()
	}
	if server.IsValid() {
		d.Server = server.String()
		if d.ServerURL == "" {
			d.ServerURL = "http://" + d.Server
		}
	}
	if peer.ServerURL != "" {
		d.ServerURL = strings.TrimRight(peer.ServerURL, "/")
	}
	if h := c.Host; h != nil {
		d.Hostname, d.Kernel, d.Initrd, d.Cmdline = h.Name, h.Kernel, h.Initrd, h.Cmdline
		d.FDT, d.FDTDir, d.Labels = h.FDT, h.FDTDir, h.Labels
		d.DefaultBoot, d.LocalBoot = h.DefaultBoot, h.LocalBoot
	}
	return d
}

// Shadowed lists the generated names that a file in the root replaces:
// each host's pxelinux.cfg/01-MAC and grub.cfg-01-MAC, and pxelinux.cfg/
// default, grub.cfg and boot.scr.uimg, as "name: why" lines for the log and
// `config check`.
func (s *Source) Shadowed(hostList []configs.Host) []string {
	names := []string{"boot.scr.uimg", "pxelinux.cfg/default", "grub.cfg"}
	for _, h := range hostList {
		if len(h.MAC.HardwareAddr) == 0 {
			continue
		}
		chain := PXELinuxChain(h.MAC.HardwareAddr, netip.Addr{})
		names = append(names, chain[0])
		names = append(names, GRUBChain(h.MAC.HardwareAddr, netip.Addr{})[0])
	}
	var out []string
	for _, n := range names {
		f, _, err := s.images.Open(n)
		if err != nil {
			continue
		}
		f.Close()
		out = append(out, n)
	}
	return out
}

// RootSource says where the root would serve name from ("root",
// "fallback"), without generating anything; see images.Store.Source.
func (s *Source) RootSource(name string) (string, error) { return s.images.Source(name) }
