package record

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/pxeperf/pxeperf/bootcfg"
)

// Kinds of record (Record.Kind). Throughput tables count images (and
// streams) by default: a 361-byte script or a 404 says nothing about the
// link.
const (
	KindImage  = "image"  // a file from the root that is neither of the below: kernels, initrds, disk images
	KindBoot   = "boot"   // a boot binary: *.efi, *.kpxe, *.pxe, pxelinux.0, undionly*, u-boot*
	KindConfig = "config" // a boot config or script, generated or from the root (boot.ipxe, pxelinux.cfg/*, grub.cfg, boot.scr.uimg)
	KindAPI    = "api"    // not a boot file: /, /api/..., /healthz, a directory
	KindError  = "error"  // the fetch did not complete (not found, denied, 4xx/5xx, aborted)
	KindStream = "stream" // a TCP or UDP throughput test (perfsrv, bench streams): no file
	// KindProbe is a lookup the loader expects to miss, not found: each
	// name of the pxelinux.cfg chain (UUID, 01-MAC, hex IP and its
	// prefixes, default-ARCH..., default) pxelinux and U-Boot's `pxe get`
	// try in turn, GRUB's grub.cfg-* names and *.lst module lists, U-Boot
	// distro boot's boot.scr(.uimg) and its dtb/ probe, shim's
	// revocations_*.efi and shim_certificate_0.efi. Not a failure.
	KindProbe = "probe"
	// KindEvent is no fetch: a milestone of a board's boot or a change to
	// what it boots (FromMilestone). Every read leaves events out unless
	// its kinds name them, so no table or fetch list counts one.
	KindEvent = "event"
)

// KindNames lists every kind, in the order help texts show them.
var KindNames = []string{KindImage, KindBoot, KindConfig, KindAPI, KindError, KindProbe, KindStream, KindEvent}

// ParseKinds reads a --kind value: kinds separated by commas. "all" (or
// "") is every kind of fetch: nil (events only when named).
func ParseKinds(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "all") {
		return nil, nil
	}
	var out []string
	for _, k := range strings.Split(s, ",") {
		k = strings.ToLower(strings.TrimSpace(k))
		if !slices.Contains(KindNames, k) {
			return nil, fmt.Errorf("kind %q: use %s or all, or a comma list of them", k, strings.Join(KindNames, ", "))
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

// KindOf is r's kind: r.Kind when set, else Classify(r) (records written
// before kinds existed, and those written as errors before probes were a
// kind of their own).
func KindOf(r *Record) string {
	if r.Kind != "" && r.Kind != KindError {
		return r.Kind
	}
	return Classify(r)
}

// Classify decides a record's kind from what was fetched and how it ended.
// It is pure and the one place the rule lives: the sink calls it when a
// record is written, the store for records written without one, and the
// readers for older records (Kind ""). An incoming Kind of KindConfig (set
// by whoever generated the file) is kept for a completed fetch.
func Classify(r *Record) string {
	if r.Kind == KindEvent || r.Proto == ProtoEvent {
		return KindEvent
	}
	switch r.Outcome {
	case "ok", "":
	case "aborted":
		if isSizeProbe(r) {
			return KindProbe
		}
		return KindError
	case "not-found":
		if ExpectedMiss(r.File) {
			return KindProbe
		}
		return KindError
	default:
		return KindError
	}
	switch strings.ToLower(r.Proto) {
	case "tcp", "udp":
		return KindStream
	}
	if r.Kind == KindConfig {
		return KindConfig
	}
	name := strings.ToLower(strings.Trim(r.File, "/"))
	base := path.Base(name)
	switch {
	case name == "" || strings.HasSuffix(r.File, "/") || name == "healthz" || name == "favicon.ico" ||
		name == "api" || strings.HasPrefix(name, "api/"):
		return KindAPI
	case isConfigName(name, base):
		return KindConfig
	case isBootName(base):
		return KindBoot
	}
	return KindImage
}

// ExpectedMiss reports whether name is one a loader asks for knowing it
// may not be there, and moves on when it is not (KindProbe): the names of
// the pxelinux.cfg chain (bootcfg.Match, and the UUID names it leaves
// out), GRUB's grub.cfg-* and *.lst files (command.lst, fs.lst, ...: GRUB
// goes on without them), U-Boot distro boot's boot.scr.uimg and boot.scr
// (tried on every boot device) and its dtb/ probe (tftpboot dtb/${fdtfile},
// "dtb/" with no fdtfile set), and shim's revocations_*.efi and
// shim_certificate*.efi (isShimProbe). A missing kernel, initrd, boot binary or a
// plain grub.cfg is a failure.
func ExpectedMiss(name string) bool {
	name = strings.TrimLeft(name, "/")
	dir, base := path.Split(name)
	if req, ok := bootcfg.Match(name); ok {
		return req.Loader != bootcfg.GRUB || !req.Default // grub.cfg itself is GRUB's last
	}
	lower := strings.ToLower(base)
	switch {
	case (dir == "pxelinux.cfg/" || strings.HasSuffix(dir, "/pxelinux.cfg/")) && isUUID(base):
		return true
	case strings.HasPrefix(base, "grub.cfg-"), path.Ext(lower) == ".lst":
		return true
	case isShimProbe(lower):
		return true
	case dir == "dtb/" || strings.HasPrefix(name, "dtb/") || strings.Contains(name, "/dtb/"):
		return true
	case lower == "overlay_map.dtb": // the Pi firmware goes on without it
		return true
	}
	return false
}

// isSizeProbe: a TFTP read that asked tsize and ended after the OACK with
// no data, as EDK2 and the Raspberry Pi bootloader do to learn a file's
// size before they ask for it again. Not a failure.
func isSizeProbe(r *Record) bool {
	return strings.EqualFold(r.Proto, "tftp") && r.TSize && r.Bytes == 0 && strings.HasPrefix(r.Err, "after OACK")
}

// isShimProbe: the optional files shim 16 loads from beside itself before
// grub<arch>.efi (revocations_sku.efi, revocations_sbat.efi,
// shim_certificate_0.efi ...); shim goes on without them.
func isShimProbe(base string) bool {
	return path.Ext(base) == ".efi" && (strings.HasPrefix(base, "revocations_") || strings.HasPrefix(base, "shim_certificate"))
}

// isUUID: 8-4-4-4-12 hex digits, the SMBIOS UUID pxelinux and U-Boot
// (pxeuuid) try first.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
				return false
			}
		}
	}
	return true
}

// isConfigName: loader configs and scripts, by name.
func isConfigName(name, base string) bool {
	if strings.HasPrefix(name, "pxelinux.cfg/") || strings.Contains(name, "/pxelinux.cfg/") ||
		strings.HasPrefix(base, "grub.cfg") || base == "boot.scr" || base == "boot.scr.uimg" {
		return true
	}
	switch path.Ext(base) {
	case ".ipxe", ".cfg", ".conf", ".scr", ".cmd", ".menu", ".uimg":
		return true
	}
	return false
}

// isBootName: network boot programs and firmware loaders, by name.
func isBootName(base string) bool {
	for _, p := range []string{"undionly", "u-boot", "pxelinux.", "lpxelinux.", "gpxelinux.", "snponly"} {
		if strings.HasPrefix(base, p) {
			return true
		}
	}
	switch path.Ext(base) {
	case ".efi", ".kpxe", ".kkpxe", ".kkkpxe", ".pxe", ".0", ".lkrn", ".c32":
		return true
	}
	return false
}

// HasKind reports whether r is of one of kinds (nil: any kind but
// KindEvent, which is no fetch and is read only when asked for).
func HasKind(r *Record, kinds []string) bool {
	if len(kinds) == 0 {
		return KindOf(r) != KindEvent
	}
	return slices.Contains(kinds, KindOf(r))
}

// classifyOld gives records written before kinds existed (kind ”) their
// kind, once, when the store is opened for writing, so that a kind filter
// can be answered by SQL. Readers classify such records themselves.
func (s *Store) classifyOld(ctx context.Context) error {
	// And those written as errors before probes had a kind (the same rule
	// KindOf applies when reading).
	rows, err := s.db.QueryContext(ctx, `SELECT id, proto, file, outcome, kind FROM records
		WHERE kind = '' OR (kind = 'error' AND outcome = 'not-found')`)
	if err != nil {
		return s.wrap("finding records without a kind", err)
	}
	type kinded struct {
		id   int64
		kind string
	}
	var todo []kinded
	for rows.Next() {
		var r Record
		if err := rows.Scan(&r.ID, &r.Proto, &r.File, &r.Outcome, &r.Kind); err != nil {
			rows.Close()
			return s.wrap("reading records without a kind", err)
		}
		if k := KindOf(&r); k != r.Kind {
			todo = append(todo, kinded{r.ID, k})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s.wrap("reading records without a kind", err)
	}
	if len(todo) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap("classifying old records", err)
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, s.be.rebind(`UPDATE records SET kind = ? WHERE id = ?`))
	if err != nil {
		return s.wrap("classifying old records", err)
	}
	defer st.Close()
	for _, k := range todo {
		if _, err := st.ExecContext(ctx, k.kind, k.id); err != nil {
			return s.wrap("classifying old records", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return s.wrap("classifying old records", err)
	}
	return nil
}
