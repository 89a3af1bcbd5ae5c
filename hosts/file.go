package hosts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/pxeperf/pxeperf/configs"
)

// fileVersion is the layout of hosts.json this code writes and reads.
const fileVersion = 1

// fileData is hosts.json: every run-time record, and the last revision
// given (so an etag never comes back after a delete).
type fileData struct {
	Version int          `json:"version"`
	Seq     uint64       `json:"seq"`
	Hosts   []fileRecord `json:"hosts"`
}

// fileRecord is one MAC's run-time record; host in the YAML entry's shape
// (HostMap), read back through configs.ParseHost.
type fileRecord struct {
	MAC      string          `json:"mac"`
	Host     json.RawMessage `json:"host,omitempty"`
	NextBoot *NextBoot       `json:"next_boot,omitempty"`
	Rev      uint64          `json:"rev"`
	Updated  time.Time       `json:"updated"`
}

// readFix is what to do about a hosts.json that does not read.
func (s *Store) readFix() string {
	return fmt.Sprintf("fix the file (serve stopped), or move it away (mv %s %s.bad) to start without run-time hosts; "+
		"pxeperf never drops entries it cannot read", s.opt.Path, s.opt.Path)
}

// load reads hosts.json into s.recs. No file is an empty store; a temp
// file a crash left behind (hosts.json.tmp*) was never renamed into place,
// so it was never acknowledged: it is removed.
func (s *Store) load() error {
	if !s.opt.ReadOnly {
		tmps, _ := filepath.Glob(s.opt.Path + ".tmp*")
		for _, t := range tmps {
			_ = os.Remove(t)
		}
	}
	b, err := os.ReadFile(s.opt.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("run-time hosts %s: %w (check the data folder's permissions)", s.opt.Path, err)
	}
	var fd fileData
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fd); err != nil {
		return fmt.Errorf("run-time hosts %s does not read: %v; %s", s.opt.Path, err, s.readFix())
	}
	if fd.Version != fileVersion {
		return fmt.Errorf("run-time hosts %s: version %d, this pxeperf reads %d; %s", s.opt.Path, fd.Version, fileVersion, s.readFix())
	}
	s.seq = fd.Seq
	for _, fr := range fd.Hosts {
		r, err := s.readRecord(fr)
		if err != nil {
			return fmt.Errorf("run-time hosts %s: entry %s: %w; %s", s.opt.Path, fr.MAC, err, s.readFix())
		}
		s.recs[r.mac] = &r.record
		s.seq = max(s.seq, r.Rev)
	}
	return nil
}

type macRecord struct {
	mac string
	record
}

// readRecord checks one record as the API would have: the host through
// configs.ParseHost, the next boot through checkNextBoot.
func (s *Store) readRecord(fr fileRecord) (macRecord, error) {
	mac, err := ParseMAC(fr.MAC)
	if err != nil {
		return macRecord{}, err
	}
	r := macRecord{mac: mac.String(), record: record{Next: fr.NextBoot, Rev: fr.Rev, Updated: fr.Updated}}
	if len(fr.Host) > 0 && string(fr.Host) != "null" {
		h, err := configs.ParseHost(fr.Host, s.cfg, nil, mac)
		if err != nil {
			return r, err
		}
		h = runtimeHost(h)
		r.Host = &h
	}
	if r.Next != nil {
		if err := checkNextBoot(r.Next); err != nil {
			return r, fmt.Errorf("next_boot: %w", err)
		}
	}
	if r.Host == nil && r.Next == nil {
		return r, errors.New("neither a host nor a next boot")
	}
	return r, nil
}

// runtimeHost drops the template lines ParseHost kept: they are lines of
// a request body, not of the config file a template error would name.
func runtimeHost(h configs.Host) configs.Host {
	h.Script.Line = 0
	h.Templates.PXELinux.Line, h.Templates.GRUB.Line, h.Templates.UBoot.Line = 0, 0, 0
	return h
}

// encode renders recs as hosts.json.
func encode(recs map[string]*record, seq uint64) ([]byte, error) {
	fd := fileData{Version: fileVersion, Seq: seq, Hosts: []fileRecord{}}
	for mac, r := range recs {
		fr := fileRecord{MAC: mac, NextBoot: r.Next, Rev: r.Rev, Updated: r.Updated}
		if r.Host != nil {
			fr.Host = r.hostJSON()
		}
		fd.Hosts = append(fd.Hosts, fr)
	}
	sort.Slice(fd.Hosts, func(i, j int) bool { return fd.Hosts[i].MAC < fd.Hosts[j].MAC })
	return json.MarshalIndent(fd, "", "  ")
}

// writeFile replaces path by data durably: a temp file beside it, fsync,
// rename over path, fsync of the folder (the rename itself must survive a
// power cut). A crash at any point leaves the old file or the new one.
func writeFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
