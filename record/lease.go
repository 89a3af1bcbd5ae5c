package record

import (
	"context"
	"time"
)

// Lease is one DHCP binding handed out or renewed (full mode), or a PXE
// client answered in proxy mode (Addr empty).
type Lease struct {
	Time     time.Time `json:"time"`
	MAC      string    `json:"client_mac"`
	Addr     string    `json:"addr,omitempty"`
	Arch     uint16    `json:"arch"` // option 93 code, 0xffff when absent
	Host     string    `json:"host,omitempty"`
	BootFile string    `json:"boot_file,omitempty"`
	Expiry   time.Time `json:"expiry"`
	Proxy    bool      `json:"proxy,omitempty"`
	Server   string    `json:"server,omitempty"` // server.name, as on records
	Site     string    `json:"site,omitempty"`
}

func insertLease(ctx context.Context, tx execer, e *entry) error {
	_, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO leases(`+leaseInsertColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
		leaseArgs(e)...)
	return err
}

const leaseInsertColumns = `uid, time_ns, client_mac, addr, arch, host, boot_file, expiry_ns, proxy, server, site`

// leaseArgs are the values of an entry's leases row (leaseInsertColumns).
func leaseArgs(e *entry) []any {
	l := e.Lease
	var exp int64
	if !l.Expiry.IsZero() {
		exp = l.Expiry.UnixNano()
	}
	return []any{e.UID, l.Time.UnixNano(), l.MAC, l.Addr, int64(l.Arch), l.Host, l.BootFile, exp, b2i(l.Proxy),
		l.Server, l.Site}
}

// Leases returns the leases recorded since a time (zero: all), oldest first.
func (s *Store) Leases(ctx context.Context, since time.Time) ([]Lease, error) {
	var from int64
	if !since.IsZero() {
		from = since.UnixNano()
	}
	rows, err := s.db.QueryContext(ctx, s.be.rebind(`SELECT time_ns, client_mac, addr, arch, host, boot_file, expiry_ns,
		proxy, server, site FROM leases WHERE time_ns >= ? ORDER BY time_ns, id`), from)
	if err != nil {
		return nil, s.wrap("querying leases", err)
	}
	defer rows.Close()
	var out []Lease
	for rows.Next() {
		var l Lease
		var t, exp int64
		if err := rows.Scan(&t, &l.MAC, &l.Addr, &l.Arch, &l.Host, &l.BootFile, &exp, &l.Proxy, &l.Server, &l.Site); err != nil {
			return nil, s.wrap("reading leases", err)
		}
		l.Time = time.Unix(0, t).UTC()
		if exp != 0 {
			l.Expiry = time.Unix(0, exp).UTC()
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("reading leases", err)
	}
	return out, nil
}
