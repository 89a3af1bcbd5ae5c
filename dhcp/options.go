package dhcp

import (
	"strings"

	"github.com/pxeperf/pxeperf/configs"
)

// Configured DHCP options (dhcp.options, dhcp.class_options,
// hosts[].dhcp_options) go into a reply after pxeperf's own, with the
// precedence host > class > global > pxeperf's: the first layer that sets a
// code decides it. A configured value replaces pxeperf's own option of that
// code (router, DNS, boot file...) wherever pxeperf sends it; any other is
// sent when the client asks for it in option 55, or always when forced. In
// proxy mode only the options a proxyDHCP reply may carry are sent
// (configs.ProxyDHCPOption; see DESIGN.md#options-in-proxy-mode). Values
// are encoded when the config is read, so this copies bytes and allocates
// nothing.

// classOptions is a dhcp.class_options entry ready to match.
type classOptions struct {
	arch, vendor, user string
	opts               []configs.DHCPOption
}

// configuredOptions are the global and class options, compiled at start.
type configuredOptions struct {
	global  []configs.DHCPOption
	classes []classOptions
}

func newConfiguredOptions(d *configs.DHCP) configuredOptions {
	o := configuredOptions{global: d.Options.Sorted()}
	for _, c := range d.ClassOptions {
		o.classes = append(o.classes, classOptions{arch: c.Match.Arch, vendor: c.Match.VendorClass,
			user: c.Match.UserClass, opts: c.Options.Sorted()})
	}
	return o
}

// matches reports whether every field the entry gives matches the client.
func (k *classOptions) matches(c client, req *msg) bool {
	if k.arch != "" {
		if a, ok := configs.ArchByCode(c.Arch); !ok || a.Name != k.arch {
			return false
		}
	}
	if k.vendor != "" && !strings.HasPrefix(c.Vendor, k.vendor) {
		return false
	}
	return k.user == "" || userClassHas(req.get(optUserClass), k.user)
}

// userClassHas reports whether option 77 is name, or (RFC 3004: a list of
// length-prefixed entries) has it as one of its entries.
func userClassHas(v []byte, name string) bool {
	if string(v) == name {
		return true
	}
	for len(v) > 0 {
		n := int(v[0])
		if n == 0 || 1+n > len(v) {
			return false
		}
		if string(v[1:1+n]) == name {
			return true
		}
		v = v[1+n:]
	}
	return false
}

// addOptions adds the configured options for this client to r. It
// returns the boot file when an option 67 replaced pxeperf's, else "".
// An iPXE client's boot file (the script URL) is replaced only by a class
// that matches on user_class: a host's or a global bootfile of, say,
// ipxe.efi would have iPXE chain itself for ever, as boot_file would.
func (s *Server) addOptions(r *reply, req *msg, c client, host *configs.Host, proxy bool) (bootFile string) {
	var done codeSet // the codes a layer has decided
	add := func(code byte, v string, force, forIPXE bool) {
		if done.contains(code) || code == optBootFile && c.IPXE && !forIPXE {
			return
		}
		done.add(code)
		if proxy && !configs.ProxyDHCPOption(code) {
			return
		}
		if i := r.index(code); i >= 0 {
			if code == optBootFile {
				bootFile, r.file = v, ""
				if len(v) < 128 {
					r.file = v
				}
			}
			r.setString(code, v)
			return
		}
		switch i := req.requestIndex(code); {
		case force:
			r.setRanked(code, v, 1)
		case i >= 0:
			r.setRanked(code, v, uint16(2+i))
		}
	}
	if host != nil {
		for _, o := range host.DHCPOptions {
			add(o.Code(), o.Wire(), o.Force, false)
		}
		if n := host.Name; n != "" && len(n) <= 255 {
			add(optHostname, n, false, false)
		}
	}
	for i := len(s.options.classes) - 1; i >= 0; i-- {
		if k := &s.options.classes[i]; k.matches(c, req) {
			for _, o := range k.opts {
				add(o.Code(), o.Wire(), o.Force, k.user != "")
			}
		}
	}
	for _, o := range s.options.global {
		add(o.Code(), o.Wire(), o.Force, false)
	}
	return bootFile
}
