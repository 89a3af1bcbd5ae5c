package hosts

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
)

// Errors of the store's changes; the API answers each with its status.
var (
	ErrNotFound     = errors.New("no such host")                        // 404
	ErrPrecondition = errors.New("precondition failed")                 // 412: If-Match / If-None-Match
	ErrFromConfig   = errors.New("the host comes from the config file") // 409
	ErrRefused      = errors.New("refused: it does not apply")          // 400: a template that does not parse
)

// FileName is the store's file in the data folder.
const FileName = "hosts.json"

// ApplyFunc puts the effective hosts in force in every service (the path
// SIGHUP takes). It first checks what can fail (templates, scripts),
// returning that error with nothing changed; then calls commit (the
// durable write, nil when nothing is written) and, when commit returns
// nil, swaps the hosts in everywhere. cfg is the config file's settings
// (templates, file name) the hosts go with.
type ApplyFunc func(cfg *configs.Config, effective []configs.Host, commit func() error) error

// Options build a Store.
type Options struct {
	// Path is <data>/hosts.json.
	Path string
	// Config is the config file as loaded: its hosts are the base, its
	// other settings what an entry is validated against.
	Config *configs.Config
	// Apply puts changes in force; nil: nothing is applied (tests).
	Apply ApplyFunc
	// Milestones receives host-set, host-deleted, next-boot-set,
	// -cleared and -consumed; nil: none.
	Milestones event.MilestoneSink
	Logger     *slog.Logger
	Now        func() time.Time // default time.Now
	// ReadOnly opens the file to read it alone (config check, while serve
	// may be writing it): temp files are left alone, changes refused.
	ReadOnly bool
}

// Store is the durable run-time host store: entries and next boots by
// MAC, kept apart from the config file's hosts (the base), merged into
// one view. Every change is checked, written to the file (write a temp
// file, fsync, rename, fsync the folder) and put in force before the call
// returns, one at a time. Reads are lock-free snapshots.
type Store struct {
	opt  Options
	mu   sync.Mutex // one change at a time: check, write, apply
	cfg  *configs.Config
	recs map[string]*record // by MAC string
	seq  uint64             // the last revision given
	// loaded is when the config file's hosts were read: their Updated.
	loaded time.Time
	view   atomic.Pointer[view]
	// yamlJSON is the stored form of yamlFor's hosts, by MAC: etags are
	// computed on every change, the forms only when the config changes.
	yamlJSON map[string]json.RawMessage
	yamlFor  *configs.Config

	pmu      sync.Mutex
	pending  map[string]time.Time // MAC -> Set of the once next boot to clear
	draining bool
}

// record is the run-time side of one MAC: its entry, its next boot, both
// or either.
type record struct {
	Host    *configs.Host
	Next    *NextBoot
	Rev     uint64
	Updated time.Time
	js      json.RawMessage // Host's stored form, made once (hostJSON)
}

// hostJSON is r.Host's stored form. Records are shared between states but
// only ever read under s.mu (or before the store is shared), where the
// form is filled in once.
func (r *record) hostJSON() json.RawMessage {
	if r.js == nil && r.Host != nil {
		r.js = hostJSON(*r.Host)
	}
	return r.js
}

// view is the merged, immutable state readers see.
type view struct {
	list      []Entry // sorted by MAC
	byMAC     map[string]*Entry
	effective []configs.Host // config order, then run-time-only entries by MAC
}

// Open reads the store's file (none yet: an empty store) and merges it
// with cfg's hosts. A file that does not read, or entries that clash with
// the config's hosts, are an error naming the file and the fix: nothing
// is ever dropped silently.
func Open(o Options) (*Store, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{opt: o, cfg: o.Config, recs: map[string]*record{}, loaded: o.Now().UTC()}
	if err := s.load(); err != nil {
		return nil, err
	}
	eff, err := s.merged(s.cfg, s.recs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (change the config's entry, or stop serve and remove the run-time entry from the file)", o.Path, err)
	}
	s.publish(eff)
	return s, nil
}

// Path is the store's file.
func (s *Store) Path() string { return s.opt.Path }

// ConfigFile names the config file whose hosts are the base.
func (s *Store) ConfigFile() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.configName()
}

// Effective lists the hosts every service is handed: the config's hosts
// with the run-time entries in place of theirs, then the run-time-only
// ones, each with its next boot over it.
func (s *Store) Effective() []configs.Host { return slices.Clone(s.view.Load().effective) }

// List is every entry, sorted by MAC.
func (s *Store) List() []Entry { return slices.Clone(s.view.Load().list) }

// Get is one MAC's entry.
func (s *Store) Get(mac net.HardwareAddr) (Entry, bool) {
	e, ok := s.view.Load().byMAC[mac.String()]
	if !ok {
		return Entry{}, false
	}
	return *e, true
}

// Cond is a write's precondition: If-Match (etags, or "*") and
// If-None-Match: * (create only).
type Cond struct {
	IfMatch     []string
	IfNoneMatch bool
}

// check returns ErrPrecondition when e (nil: none) fails c. runtime says
// whether an API entry exists (If-None-Match: * guards only those).
func (c Cond) check(e *Entry, runtime bool) error {
	if c.IfNoneMatch && runtime {
		return fmt.Errorf("%w: If-None-Match: * but a run-time entry exists (etag %s); drop the header to replace it", ErrPrecondition, e.ETag)
	}
	if len(c.IfMatch) == 0 {
		return nil
	}
	if e == nil {
		return fmt.Errorf("%w: If-Match but the host does not exist; drop the header to create it", ErrPrecondition)
	}
	for _, t := range c.IfMatch {
		if t == "*" || strings.TrimPrefix(t, "W/") == e.ETag {
			return nil
		}
	}
	return fmt.Errorf("%w: If-Match %s but the entry's etag is %s (someone changed it since you read it); GET it again and retry",
		ErrPrecondition, strings.Join(c.IfMatch, ", "), e.ETag)
}

// merged builds the effective host list of cfg's hosts and recs, and
// checks it as a config file's hosts are checked (a fixed address twice).
func (s *Store) merged(cfg *configs.Config, recs map[string]*record) ([]configs.Host, error) {
	var out []configs.Host
	done := map[string]bool{}
	for _, h := range cfg.Hosts {
		k := h.MAC.String()
		done[k] = true
		if r := recs[k]; r != nil && r.Host != nil {
			h = *r.Host
		}
		out = append(out, h)
	}
	var extra []string
	for k, r := range recs {
		if !done[k] && r.Host != nil {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	for _, k := range extra {
		out = append(out, *recs[k].Host)
	}
	cc := *cfg
	cc.Hosts = out
	var errs configs.Errors
	for _, e := range flattenErrs(cc.Validate()) {
		if strings.HasPrefix(e.Key, "hosts[") {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		for _, e := range errs {
			e.Msg += " (" + s.describe(out, e.Key) + ")"
		}
		return nil, errs
	}
	for i := range out {
		out[i] = overlay(out[i], recs[out[i].MAC.String()].next())
	}
	return out, nil
}

// describe names the host an error key (hosts[N]...) points at in list.
func (s *Store) describe(list []configs.Host, key string) string {
	var i int
	if _, err := fmt.Sscanf(key, "hosts[%d]", &i); err != nil || i < 0 || i >= len(list) {
		return "a run-time host"
	}
	h := list[i]
	src := "the config file"
	if r := s.recs[h.MAC.String()]; r != nil && r.Host != nil {
		src = s.opt.Path
	}
	return fmt.Sprintf("hosts[%d] is %s %s, from %s", i, h.MAC, h.Name, src)
}

func (r *record) next() *NextBoot {
	if r == nil {
		return nil
	}
	return r.Next
}

// publish builds the view readers see from s.cfg, s.recs and eff.
func (s *Store) publish(eff []configs.Host) {
	v := &view{byMAC: map[string]*Entry{}, effective: eff}
	yamlHosts := map[string]configs.Host{}
	for _, h := range s.cfg.Hosts {
		yamlHosts[h.MAC.String()] = h
	}
	if s.yamlFor != s.cfg {
		s.yamlJSON, s.yamlFor = map[string]json.RawMessage{}, s.cfg
		for k, h := range yamlHosts {
			s.yamlJSON[k] = hostJSON(h)
		}
	}
	add := func(e Entry, js json.RawMessage) {
		e.ETag = etag(e.Source, js, e.NextBoot, e.rev)
		v.list = append(v.list, e)
	}
	for k, h := range yamlHosts {
		e := Entry{MAC: h.MAC.HardwareAddr, Source: SourceConfig, Host: h, Updated: s.loaded}
		js := s.yamlJSON[k]
		if r := s.recs[k]; r != nil {
			e.NextBoot, e.rev, e.Updated = r.Next, r.Rev, r.Updated
			if r.Host != nil {
				e.Source, e.Host, js = SourceAPIOverConfig, *r.Host, r.hostJSON()
			}
		}
		add(e, js)
	}
	for k, r := range s.recs {
		if _, inYAML := yamlHosts[k]; inYAML || r.Host == nil {
			continue
		}
		add(Entry{MAC: r.Host.MAC.HardwareAddr, Source: SourceAPI, Host: *r.Host, NextBoot: r.Next, rev: r.Rev, Updated: r.Updated}, r.hostJSON())
	}
	sort.Slice(v.list, func(i, j int) bool { return v.list[i].MAC.String() < v.list[j].MAC.String() })
	for i := range v.list {
		v.byMAC[v.list[i].MAC.String()] = &v.list[i]
	}
	s.view.Store(v)
}

func flattenErrs(err error) configs.Errors {
	var es configs.Errors
	if errors.As(err, &es) {
		return es
	}
	var e *configs.Error
	if errors.As(err, &e) {
		return configs.Errors{e}
	}
	if err != nil {
		return configs.Errors{{Msg: err.Error()}}
	}
	return nil
}
