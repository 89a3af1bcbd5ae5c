package configs

import (
	"bytes"
	"fmt"
	"net"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxHostKeys bounds the keys of one entry ParseHost reads, nested ones
// (labels, templates) included: far above what an entry needs.
const maxHostKeys = 256

// countKeys counts the mapping keys in n and below.
func countKeys(n *yaml.Node) int {
	c := 0
	if n.Kind == yaml.MappingNode {
		c = len(n.Content) / 2
	}
	for _, ch := range n.Content {
		c += countKeys(ch)
	}
	return c
}

// ParseHost reads ONE host entry as hosts[] takes it, for a host set at
// run time (JSON is YAML, so an API body parses here): unknown keys are
// named with the nearest key, values decode as Parse decodes them, and the
// entry is validated as Validate validates c with the entry appended to
// others (the hosts it joins: a MAC or fixed address given twice is
// refused, as every check a host entry gets in a file). mac, when set, is
// the entry's MAC if it names none; an entry naming another is refused.
//
// Errors are Errors keyed relative to the entry ("kernel",
// "dhcp_options.root_path"), with the same message `config check` prints
// after the key; Line is the entry's own line when it spans more than one.
func ParseHost(data []byte, c *Config, others []Host, mac net.HardwareAddr) (Host, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Host{}, Errors{{Msg: "not valid JSON: " + strings.TrimPrefix(err.Error(), "yaml: ") + "; send one host entry as a JSON object"}}
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return Host{}, Errors{{Msg: `a host entry is one JSON object, e.g. {"name": "board1", "kernel": "vmlinuz"}`}}
	}
	n := doc.Content[0]
	if keys := countKeys(n); keys > maxHostKeys {
		// Each unknown key is looked up among every key of the config for
		// its nearest: a body of thousands would cost seconds of CPU.
		return Host{}, Errors{{Msg: fmt.Sprintf("%d keys: a host entry has at most %d; send only the keys of hosts[] (pxeperf config default lists them)", keys, maxHostKeys)}}
	}
	prefix := fmt.Sprintf("hosts[%d]", len(others))
	lines := map[string]int{}
	var keyErrs []error
	checkKeys(n, reflect.TypeOf(Host{}), prefix, lines, &keyErrs)
	errs := flatten(joinErrors(keyErrs))
	var h Host
	if err := n.Decode(&h); err != nil {
		for _, e := range flatten(decodeError(err)) {
			if e.Key == "" && e.Line > 0 {
				e.Key = keyAt(e.Line, lines)
			}
			errs = append(errs, e)
		}
	}
	if len(h.MAC.HardwareAddr) == 0 && mac != nil {
		h.MAC = MAC{mac}
	} else if mac != nil && h.MAC.String() != mac.String() {
		errs = append(errs, &Error{Key: prefix + ".mac", Msg: fmt.Sprintf("%s is not the MAC the entry is stored under (%s); leave mac out or make them match", h.MAC, mac)})
	}
	bad := map[string]bool{}
	for _, e := range errs {
		bad[e.Key] = true
	}
	cc := *c
	cc.Hosts = append(append(make([]Host, 0, len(others)+1), others...), h)
	for _, e := range flatten(cc.Validate()) {
		if (e.Key == prefix || strings.HasPrefix(e.Key, prefix+".")) && !bad[e.Key] {
			errs = append(errs, e)
		}
	}
	if len(errs) == 0 {
		return h, nil
	}
	oneLine := !bytes.Contains(bytes.TrimSpace(data), []byte("\n"))
	for _, e := range errs {
		e.File = ""
		if e.Line == 0 {
			e.Line = lineOf(e.Key, lines)
		}
		if oneLine {
			e.Line = 0
		}
		e.Key = strings.TrimPrefix(strings.TrimPrefix(e.Key, prefix), ".")
	}
	return Host{}, errs
}
