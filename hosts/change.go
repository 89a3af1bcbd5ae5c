package hosts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"strconv"
	"strings"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
)

// Put stores body (a host entry, JSON) as mac's run-time entry, replacing
// any, validated as `config check` validates a host entry among the
// others. created: there was no run-time entry before.
func (s *Store) Put(mac net.HardwareAddr, body []byte, c Cond) (e Entry, created bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := mac.String()
	old := s.recs[k]
	runtime := old != nil && old.Host != nil
	if err := c.check(s.entry(k), runtime); err != nil {
		return Entry{}, false, err
	}
	h, err := configs.ParseHost(body, s.cfg, s.bases(k), mac)
	if err != nil {
		return Entry{}, false, err
	}
	h = runtimeHost(h)
	recs := maps.Clone(s.recs)
	recs[k] = &record{Host: &h, Next: old.next(), Rev: s.seq + 1, Updated: s.opt.Now().UTC()}
	ms := s.milestone(event.MilestoneHostSet, mac, h.Name, map[string]string{"created": strconv.FormatBool(!runtime)})
	if err := s.commit(recs, s.cfg, true, ms); err != nil {
		return Entry{}, false, err
	}
	return *s.entry(k), !runtime, nil
}

// Patch applies an RFC 7396 JSON merge patch to mac's entry as it is (the
// run-time one, else the config file's) and stores the result as its
// run-time entry, validated as Put validates.
func (s *Store) Patch(mac net.HardwareAddr, patch []byte, c Cond) (Entry, error) {
	s.mu.Lock()
	e := s.entry(mac.String())
	s.mu.Unlock()
	if e == nil {
		return Entry{}, fmt.Errorf("%w: %s has no host entry to patch; PUT /api/hosts/%s to create it", ErrNotFound, mac, mac)
	}
	var p any
	if err := json.Unmarshal(patch, &p); err != nil {
		return Entry{}, configs.Errors{{Msg: "not valid JSON: " + err.Error() + "; send a JSON merge patch object (RFC 7396)"}}
	}
	if _, ok := p.(map[string]any); !ok {
		return Entry{}, configs.Errors{{Msg: `a merge patch is one JSON object, e.g. {"kernel": "vmlinuz", "labels": {"rack": null}}`}}
	}
	base, err := HostMap(e.Host)
	if err != nil {
		return Entry{}, err
	}
	body, err := json.Marshal(mergePatch(base, p))
	if err != nil {
		return Entry{}, err
	}
	if len(c.IfMatch) == 0 {
		// The patch was made against e: a change in between must not be
		// overwritten by the merged whole.
		c.IfMatch = []string{e.ETag}
	}
	ne, _, err := s.Put(mac, body, c)
	return ne, err
}

// mergePatch is RFC 7396: patch's members replace target's, null removes,
// objects merge recursively.
func mergePatch(target any, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = mergePatch(t[k], v)
	}
	return t
}

// Delete removes mac's run-time entry and its next boot; the config
// file's entry, if any, is in force again.
func (s *Store) Delete(mac net.HardwareAddr, c Cond) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := mac.String()
	e := s.entry(k)
	r := s.recs[k]
	if r == nil || r.Host == nil {
		if e != nil {
			return fmt.Errorf("%w: %s is hosts[] of %s, not a run-time entry; edit it there", ErrFromConfig, mac, s.configName())
		}
		return fmt.Errorf("%w: %s has no run-time entry; GET /api/hosts lists them", ErrNotFound, mac)
	}
	if err := c.check(e, true); err != nil {
		return err
	}
	recs := maps.Clone(s.recs)
	delete(recs, k)
	ms := s.milestone(event.MilestoneHostDeleted, mac, e.Host.Name, map[string]string{"source": e.Source})
	return s.commit(recs, s.cfg, true, ms)
}

// configName is the config file's name for messages.
func (s *Store) configName() string {
	if s.cfg.File == "" {
		return "the config file"
	}
	return s.cfg.File
}

// NoHostFix is what to do when a next boot names a MAC without a host.
const NoHostFix = "PUT /api/hosts/MAC first, or `pxeperf hosts set MAC`"

// SetNextBoot sets what mac boots next (body: a NextBoot, JSON). mac needs
// a host entry (the config file's or a run-time one).
func (s *Store) SetNextBoot(mac net.HardwareAddr, body []byte, c Cond) (Entry, error) {
	nb, err := decodeNextBoot(body)
	if err != nil {
		return Entry{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := mac.String()
	e := s.entry(k)
	if e == nil {
		return Entry{}, fmt.Errorf("%w: %s has no host entry to boot; %s", ErrNotFound, mac, strings.ReplaceAll(NoHostFix, "MAC", mac.String()))
	}
	if err := c.check(e, e.Source != SourceConfig); err != nil {
		return Entry{}, err
	}
	nb.Set = s.opt.Now().UTC()
	recs := maps.Clone(s.recs)
	var h *configs.Host
	if r := s.recs[k]; r != nil {
		h = r.Host
	}
	recs[k] = &record{Host: h, Next: &nb, Rev: s.seq + 1, Updated: nb.Set}
	ms := s.milestone(event.MilestoneNextBootSet, mac, e.Host.Name, nextDetail(&nb))
	if err := s.commit(recs, s.cfg, true, ms); err != nil {
		return Entry{}, err
	}
	return *s.entry(k), nil
}

// decodeNextBoot reads a next boot strictly: an unknown key is an error
// naming the known ones. Its set time is the server's.
func decodeNextBoot(body []byte) (NextBoot, error) {
	var nb NextBoot
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&nb); err != nil {
		msg := err.Error()
		key := ""
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			key = strings.Trim(f, `"`)
			msg = fmt.Sprintf("unknown key %q; known keys here: action, cmdline, fdt, initrd, kernel, once, script", key)
		} else {
			msg = "not a next boot: " + strings.TrimPrefix(msg, "json: ") +
				`; send e.g. {"action": "boot", "kernel": "vmlinuz", "once": true}`
		}
		return nb, configs.Errors{{Key: key, Msg: msg}}
	}
	return nb, checkNextBoot(&nb)
}

// nextDetail is a next boot as a milestone's detail.
func nextDetail(nb *NextBoot) map[string]string {
	d := map[string]string{"action": nb.Action, "once": strconv.FormatBool(nb.Once)}
	for k, v := range map[string]string{"kernel": nb.Kernel, "initrd": nb.Initrd, "cmdline": nb.Cmdline, "fdt": nb.FDT} {
		if v != "" {
			d[k] = v
		}
	}
	return d
}

// ClearNextBoot removes mac's next boot.
func (s *Store) ClearNextBoot(mac net.HardwareAddr, c Cond) (Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := mac.String()
	e := s.entry(k)
	if e == nil {
		return Entry{}, fmt.Errorf("%w: %s has no host entry; GET /api/hosts lists them", ErrNotFound, mac)
	}
	if e.NextBoot == nil {
		return Entry{}, fmt.Errorf("%w: %s has no next boot set; it boots its host entry", ErrNotFound, mac)
	}
	if err := c.check(e, e.Source != SourceConfig); err != nil {
		return Entry{}, err
	}
	ms := s.milestone(event.MilestoneNextBootCleared, mac, e.Host.Name, nextDetail(e.NextBoot))
	if err := s.commit(s.withoutNext(k), s.cfg, true, ms); err != nil {
		return Entry{}, err
	}
	return *s.entry(k), nil
}

// withoutNext is s.recs with k's next boot gone (its record too when it
// held nothing else).
func (s *Store) withoutNext(k string) map[string]*record {
	recs := maps.Clone(s.recs)
	r := s.recs[k]
	if r.Host == nil {
		delete(recs, k)
	} else {
		recs[k] = &record{Host: r.Host, Rev: s.seq + 1, Updated: s.opt.Now().UTC()}
	}
	return recs
}

// Reload merges a newly loaded config file (SIGHUP) with the run-time
// entries and puts the result in force; on an error nothing changes.
func (s *Store) Reload(cfg *configs.Config) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commit(s.recs, cfg, false, nil)
}

// entry is k's entry in the current view; the caller holds s.mu.
func (s *Store) entry(k string) *Entry {
	e, ok := s.view.Load().byMAC[k]
	if !ok {
		return nil
	}
	c := *e
	return &c
}

// bases lists the base host entries but k's: those an entry for k is
// validated among (config order first, so hosts[N] in a message is the
// config file's N-th when N is below its count).
func (s *Store) bases(k string) []configs.Host {
	var out []configs.Host
	seen := map[string]bool{}
	for _, h := range s.cfg.Hosts {
		hk := h.MAC.String()
		seen[hk] = true
		if r := s.recs[hk]; r != nil && r.Host != nil {
			h = *r.Host
		}
		if hk != k {
			out = append(out, h)
		}
	}
	for _, e := range s.view.Load().list {
		if hk := e.MAC.String(); !seen[hk] && hk != k {
			out = append(out, e.Host)
		}
	}
	return out
}

// commit makes recs (and cfg) the store's state: it checks the merged
// hosts, writes the file (when write), puts them in force through Apply
// and publishes the new view, then sends ms. Any failure leaves
// everything as it was. The caller holds s.mu.
func (s *Store) commit(recs map[string]*record, cfg *configs.Config, write bool, ms []event.Milestone) error {
	if s.opt.ReadOnly {
		return fmt.Errorf("run-time hosts %s are open read-only; change them through serve's admin API", s.opt.Path)
	}
	eff, err := s.merged(cfg, recs)
	if err != nil {
		return err
	}
	seq := s.seq
	for _, r := range recs {
		seq = max(seq, r.Rev)
	}
	persist := func() error {
		if !write {
			return nil
		}
		b, err := encode(recs, seq)
		if err == nil {
			err = writeFile(s.opt.Path, b)
		}
		if err != nil {
			return fmt.Errorf("writing run-time hosts %s: %w (check free space and permissions of the data folder); nothing changed", s.opt.Path, err)
		}
		return nil
	}
	if s.opt.Apply == nil {
		err = persist()
	} else {
		committed := false
		err = s.opt.Apply(cfg, eff, func() error { committed = true; return persist() })
		if err != nil && !committed {
			return fmt.Errorf("%w: %w", ErrRefused, err)
		}
	}
	if err != nil {
		return err
	}
	s.recs, s.cfg, s.seq = recs, cfg, seq
	if !write {
		s.loaded = s.opt.Now().UTC()
	}
	s.publish(eff)
	for _, m := range ms {
		if s.opt.Milestones != nil {
			s.opt.Milestones.Milestone(m)
		}
	}
	return nil
}

func (s *Store) milestone(what string, mac net.HardwareAddr, host string, detail map[string]string) []event.Milestone {
	return []event.Milestone{{Time: s.opt.Now().UTC(), MAC: mac, Host: host, What: what, Detail: detail}}
}
