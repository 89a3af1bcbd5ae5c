package hosts

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/pxeperf/pxeperf/configs"
	"go.yaml.in/yaml/v3"
)

// NextBoot is what a board boots next, set at run time.
type NextBoot struct {
	Action  string    `json:"action"` // ActionBoot (kernel or script), ActionLocal, ActionShell
	Kernel  string    `json:"kernel,omitempty"`
	Initrd  string    `json:"initrd,omitempty"`
	Cmdline string    `json:"cmdline,omitempty"`
	FDT     string    `json:"fdt,omitempty"`
	Script  string    `json:"script,omitempty"` // an iPXE script template, as hosts[].script
	Once    bool      `json:"once,omitempty"`
	Set     time.Time `json:"set"`
}

// Next boot actions.
const (
	ActionBoot  = "boot"
	ActionLocal = configs.BootLocal
	ActionShell = configs.BootShell
)

// Where an entry comes from (Entry.Source).
const (
	SourceConfig        = "config"          // the config file's hosts[]
	SourceAPI           = "api"             // set at run time only
	SourceAPIOverConfig = "api-over-config" // set at run time, replacing the config file's entry
)

// Entry is one MAC as the merged view has it: its base host entry (the
// run-time one, else the config file's), its next boot, and the etag that
// changes with either.
type Entry struct {
	MAC      net.HardwareAddr
	Source   string
	Host     configs.Host // the base, without the next boot
	NextBoot *NextBoot    // nil: none
	ETag     string       // a quoted strong etag
	Updated  time.Time
	rev      uint64 // the run-time record's revision; 0 for a config entry alone
}

// Effective is the host a loader is handed: the base with the next boot
// over it. Action boot sets the kernel, initrd, cmdline and fdt (and the
// script, cleared when the next boot has none); local and shell clear them
// and set DefaultBoot, so renderers only ever look at a configs.Host.
func (e *Entry) Effective() configs.Host {
	return overlay(e.Host, e.NextBoot)
}

func overlay(h configs.Host, nb *NextBoot) configs.Host {
	if nb == nil {
		return h
	}
	switch nb.Action {
	case ActionBoot:
		h.Kernel, h.Initrd, h.Cmdline, h.FDT = nb.Kernel, nb.Initrd, nb.Cmdline, nb.FDT
		h.Script = configs.Template{Text: nb.Script}
	case ActionLocal, ActionShell:
		h.Kernel, h.Initrd, h.Cmdline, h.FDT = "", "", "", ""
		h.Script = configs.Template{}
		h.DefaultBoot = nb.Action
	}
	return h
}

// HostMap is a host entry in the YAML shape (mac, name, address, kernel,
// labels, ...) as a JSON-ready map, empty values left out: what the API
// answers and hosts.json stores, and what ParseHost reads back unchanged.
// It goes through the entry's own YAML encoding, so a field added to
// configs.Host appears here with no change.
func HostMap(h configs.Host) (map[string]any, error) {
	b, err := yaml.Marshal(h)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	prune(m)
	return m, nil
}

// hostJSON is HostMap(h) as JSON ("null" when it does not encode).
func hostJSON(h configs.Host) json.RawMessage {
	m, err := HostMap(h)
	if err != nil {
		return json.RawMessage("null")
	}
	b, err := json.Marshal(m)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// prune drops empty strings, nulls and empty maps and lists: absent and
// empty are the same to a host entry.
func prune(m map[string]any) {
	for k, v := range m {
		switch x := v.(type) {
		case nil:
			delete(m, k)
		case string:
			if x == "" {
				delete(m, k)
			}
		case map[string]any:
			prune(x)
			if len(x) == 0 {
				delete(m, k)
			}
		case []any:
			if len(x) == 0 {
				delete(m, k)
			}
		}
	}
}

// etag is a strong etag over what a client sees of the entry plus the
// run-time revision, so every acknowledged write changes it, even one
// that writes the same entry again.
func etag(source string, host json.RawMessage, nb *NextBoot, rev uint64) string {
	b, _ := json.Marshal(struct {
		S string          `json:"s"`
		H json.RawMessage `json:"h"`
		N *NextBoot       `json:"n"`
		R uint64          `json:"r"`
	}{source, host, nb, rev})
	sum := sha256.Sum256(b)
	return `"` + hex.EncodeToString(sum[:10]) + `"`
}

// ParseMAC reads a MAC in any common form: 52:54:00:12:34:56,
// 52-54-00-12-34-56, 5254.0012.3456 or 525400123456.
func ParseMAC(s string) (net.HardwareAddr, error) {
	s = strings.TrimSpace(s)
	if len(s) == 12 && !strings.ContainsAny(s, ":-.") {
		var b strings.Builder
		for i := 0; i < 12; i += 2 {
			if i > 0 {
				b.WriteByte(':')
			}
			b.WriteString(s[i : i+2])
		}
		s = b.String()
	}
	mac, err := net.ParseMAC(s)
	if err != nil || len(mac) != 6 {
		return nil, fmt.Errorf("%q is not an Ethernet MAC address; write e.g. 52:54:00:12:34:56", s)
	}
	return mac, nil
}

// checkNextBoot says what is wrong with a next boot, as a config error:
// the key and the fix.
func checkNextBoot(nb *NextBoot) error {
	var errs configs.Errors
	add := func(key, format string, a ...any) {
		errs = append(errs, &configs.Error{Key: key, Msg: fmt.Sprintf(format, a...)})
	}
	if nb.Action == "" && (nb.Kernel != "" || nb.Script != "") {
		nb.Action = ActionBoot
	}
	files := map[string]string{"kernel": nb.Kernel, "initrd": nb.Initrd, "cmdline": nb.Cmdline, "fdt": nb.FDT}
	switch nb.Action {
	case ActionBoot:
		if nb.Kernel == "" && nb.Script == "" {
			add("kernel", "a next boot of action boot needs a kernel (or a script); name a file in the root, e.g. vmlinuz")
		}
	case ActionLocal, ActionShell:
		for _, k := range []string{"kernel", "initrd", "cmdline", "fdt"} {
			if files[k] != "" {
				add(k, "a next boot of action %s boots no kernel; leave %s out, or use action boot", nb.Action, k)
			}
		}
		if nb.Script != "" {
			add("script", "a next boot of action %s runs no script; leave script out, or use action boot", nb.Action)
		}
	default:
		add("action", "%q is not one of boot, local, shell", nb.Action)
	}
	for _, k := range []string{"kernel", "initrd", "cmdline", "fdt"} {
		if strings.ContainsFunc(files[k], func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			add(k, "%q has a control character (a newline would end the loader's command); write it on one line", files[k])
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}
