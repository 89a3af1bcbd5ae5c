package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pxeperf/pxeperf/record"
)

// Options tune the tables built from records.
type Options struct {
	// Kinds are the record kinds (record.KindNames) whose throughput the
	// tables count: a pxeperf report --kind or /api/report?kind= choice.
	// nil: images and streams (TFTP table: images and boot binaries), so
	// that a 361-byte script or a probe never makes a throughput row.
	// Fetch counts (clients, fetches) always count every kind.
	Kinds []string
	// Merge lists the split keys (Splits: source, iface, mtu, speed;
	// ParseMerge) whose values may share a row: a pxeperf report --merge
	// or /api/report?merge= choice. nil: a row never mixes sources or
	// links.
	Merge []string
}

// throughputKinds is what a throughput table counts by default: files
// that are the payload of a boot (kernels, initrds, disk images) and
// throughput tests.
var throughputKinds = []string{record.KindImage, record.KindStream}

// tftpKinds: over TFTP a boot's payload is mostly the boot binary itself.
var tftpKinds = []string{record.KindImage, record.KindBoot}

// counter decides which records a throughput table counts, and keeps what
// it left out for the table's note.
type counter struct {
	kinds []string
	left  map[string]int
}

func newCounter(o Options, def []string) *counter {
	k := o.Kinds
	if len(k) == 0 {
		k = def
	}
	return &counter{kinds: k, left: map[string]int{}}
}

// use reports whether r's throughput counts: completed, and of a counted
// kind. A completed fetch of another kind is remembered for the note.
func (c *counter) use(r *record.Record) bool {
	if !measured(*r) {
		return false
	}
	if k := record.KindOf(r); !slices.Contains(c.kinds, k) {
		c.left[k]++
		return false
	}
	return true
}

// note says what use left out, or "".
func (c *counter) note() string {
	if len(c.left) == 0 {
		return ""
	}
	var parts []string
	n := 0
	for _, k := range record.KindNames {
		if c.left[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, c.left[k]))
			n += c.left[k]
		}
	}
	return fmt.Sprintf("%d completed fetch(es) of other kinds left out (%s): throughput here counts %s; choose with --kind.",
		n, strings.Join(parts, ", "), strings.Join(c.kinds, " and "))
}

func (c *counter) addNote(t *Table) {
	if n := c.note(); n != "" {
		t.Notes = append(t.Notes, n)
		t.Empty += " " + n // shown instead of an empty table
	}
}
