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
}

func insertLease(ctx context.Context, tx execer, e *entry) error {
	l := e.Lease
	var exp int64
	if !l.Expiry.IsZero() {
		exp = l.Expiry.UnixNano()
	}
	_, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO leases(uid, time_ns, client_mac, addr, arch, host,
		boot_file, expiry_ns, proxy) VALUES (?,?,?,?,?,?,?,?,?)`,
		e.UID, l.Time.UnixNano(), l.MAC, l.Addr, l.Arch, l.Host, l.BootFile, exp, l.Proxy)
	return err
}

// Leases returns the leases recorded since a time (zero: all), oldest first.
func (s *Store) Leases(ctx context.Context, since time.Time) ([]Lease, error) {
	var from int64
	if !since.IsZero() {
		from = since.UnixNano()
	}
	rows, err := s.db.QueryContext(ctx, `SELECT time_ns, client_mac, addr, arch, host, boot_file, expiry_ns, proxy
		FROM leases WHERE time_ns >= ? ORDER BY time_ns, id`, from)
	if err != nil {
		return nil, s.wrap("querying leases", err)
	}
	defer rows.Close()
	var out []Lease
	for rows.Next() {
		var l Lease
		var t, exp int64
		if err := rows.Scan(&t, &l.MAC, &l.Addr, &l.Arch, &l.Host, &l.BootFile, &exp, &l.Proxy); err != nil {
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
