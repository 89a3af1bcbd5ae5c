package record

import (
	"context"
	"fmt"
	"time"
)

// CopyStats counts what Copy moved.
type CopyStats struct {
	Records, Leases int64 // read from the source
}

// Copy moves every record (with its labels and intervals) and lease from
// one store to another, batch entries per transaction, keeping their uids:
// records already in the target are skipped, so a copy cut short is
// simply run again. progress, when set, is called after each batch. Ids
// are the target's own.
func Copy(ctx context.Context, from, to *Store, batch int, progress func(CopyStats)) (CopyStats, error) {
	if batch <= 0 {
		batch = 1000
	}
	var st CopyStats
	for _, t := range []struct {
		export func(ctx context.Context, after int64, n int) ([]*entry, int64, error)
		count  *int64
	}{{from.exportRecords, &st.Records}, {from.exportLeases, &st.Leases}} {
		for after := int64(0); ; {
			es, last, err := t.export(ctx, after, batch)
			if err != nil {
				return st, err
			}
			if len(es) == 0 {
				break
			}
			if err := to.addBatch(ctx, es); err != nil {
				return st, err
			}
			*t.count += int64(len(es))
			after = last
			if progress != nil {
				progress(st)
			}
		}
	}
	return st, nil
}

// exportRecords reads up to n records with ids after after, in id order,
// as entries (uid, record, intervals); last is the last id read.
func (s *Store) exportRecords(ctx context.Context, after int64, n int) (es []*entry, last int64, err error) {
	rows, err := s.db.QueryContext(ctx, s.be.rebind("SELECT uid, "+recordColumns+" FROM records WHERE id > ? ORDER BY id LIMIT ?"),
		after, n)
	if err != nil {
		return nil, 0, s.wrap("reading records to copy", err)
	}
	byID := map[int64]*entry{}
	for rows.Next() {
		e := &entry{}
		r, err := scanRecord(rows, &e.UID)
		if err != nil {
			rows.Close()
			return nil, 0, s.wrap("reading records to copy", err)
		}
		e.Record = &r
		es = append(es, e)
		byID[r.ID] = e
		last = r.ID
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, s.wrap("reading records to copy", err)
	}
	if len(es) == 0 {
		return nil, after, nil
	}
	rows, err = s.db.QueryContext(ctx, s.be.rebind(`SELECT record_id, start_us, end_us, bytes, retransmits, cwnd, snd_wnd, rtt_us
		FROM intervals WHERE record_id > ? AND record_id <= ? ORDER BY record_id, seq`), after, last)
	if err != nil {
		return nil, 0, s.wrap("reading intervals to copy", err)
	}
	defer rows.Close()
	for rows.Next() {
		var iv Interval
		var start, end, rtt int64
		if err := rows.Scan(&iv.RecordID, &start, &end, &iv.Bytes, &iv.Retransmits, &iv.Cwnd, &iv.SndWnd, &rtt); err != nil {
			return nil, 0, s.wrap("reading intervals to copy", err)
		}
		iv.Start, iv.End, iv.RTT = time.Duration(start)*time.Microsecond, time.Duration(end)*time.Microsecond,
			time.Duration(rtt)*time.Microsecond
		if e := byID[iv.RecordID]; e != nil {
			e.Intervals = append(e.Intervals, iv)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 0, s.wrap("reading intervals to copy", err)
	}
	return es, last, nil
}

// exportLeases reads up to n leases with ids after after, in id order.
func (s *Store) exportLeases(ctx context.Context, after int64, n int) (es []*entry, last int64, err error) {
	rows, err := s.db.QueryContext(ctx, s.be.rebind(`SELECT id, uid, time_ns, client_mac, addr, arch, host, boot_file,
		expiry_ns, proxy, server, site FROM leases WHERE id > ? ORDER BY id LIMIT ?`), after, n)
	if err != nil {
		return nil, 0, s.wrap("reading leases to copy", err)
	}
	defer rows.Close()
	for rows.Next() {
		var l Lease
		var t, exp int64
		e := &entry{Lease: &l}
		if err := rows.Scan(&last, &e.UID, &t, &l.MAC, &l.Addr, &l.Arch, &l.Host, &l.BootFile, &exp, &l.Proxy,
			&l.Server, &l.Site); err != nil {
			return nil, 0, s.wrap("reading leases to copy", err)
		}
		l.Time = time.Unix(0, t).UTC()
		if exp != 0 {
			l.Expiry = time.Unix(0, exp).UTC()
		}
		es = append(es, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, s.wrap("reading leases to copy", err)
	}
	return es, last, nil
}

// Migrate opens the store at loc, creating or upgrading its schema, and
// returns the schema version it has now.
func Migrate(ctx context.Context, loc Location) (int, error) {
	s, err := OpenURL(ctx, loc)
	if err != nil {
		if s != nil {
			s.Close()
		}
		return 0, err
	}
	defer s.Close()
	return SchemaVersion, nil
}

// String names the store for messages.
func (s *Store) String() string { return fmt.Sprintf("%s %s", s.be.kind(), s.path) }
