package record

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestQueryBefore: a paged read (Limit + Before) walks every record once,
// newest first, also where records share a time.
func TestQueryBefore(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	for i := range 7 {
		r := Record{Time: t0.Add(time.Duration(i/2) * time.Minute), Source: "serve", Proto: "http", Direction: "rx",
			ClientIP: "10.0.0.1", File: "f", Outcome: "ok"}
		if _, err := s.Add(ctx, &r, nil); err != nil {
			t.Fatal(err)
		}
	}
	var got []int64
	f := Filter{Limit: 3}
	for range 5 {
		recs, err := s.Query(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			got = append(got, r.ID)
		}
		if len(recs) < f.Limit {
			break
		}
		last := recs[len(recs)-1]
		f.Before = Position{Time: last.Time, ID: last.ID}
	}
	want := []int64{7, 6, 5, 4, 3, 2, 1}
	if len(got) != len(want) {
		t.Fatalf("pages gave %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("pages gave %v, want %v", got, want)
		}
	}
}

// TestEach: Each hands over Query's records in Query's order, one at a
// time, and an error from the callback stops the reading and comes back
// as it is (the API ends a page with it).
func TestEach(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	for i := range 6 {
		r := Record{Time: t0.Add(time.Duration(i%3) * time.Minute), Source: "serve", Proto: "http", Direction: "rx",
			ClientIP: "10.0.0.1", File: "f", Outcome: "ok", Labels: map[string]string{"i": string(rune('a' + i))}}
		if _, err := s.Add(ctx, &r, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []Filter{{}, {Limit: 4}, {Limit: 4, Before: Position{Time: t0.Add(time.Minute), ID: 5}}} {
		want, err := s.Query(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var got []Record
		if err := s.Each(ctx, f, func(r *Record) error { got = append(got, *r); return nil }); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" || len(got) == 0 {
			t.Errorf("filter %+v: Each differs from Query (-Query +Each):\n%s", f, diff)
		}
	}
	stop := errors.New("enough")
	calls := 0
	err := s.Each(ctx, Filter{}, func(*Record) error {
		calls++
		if calls == 2 {
			return stop
		}
		return nil
	})
	if err != stop || calls != 2 {
		t.Errorf("Each after the callback's error: err %v, %d calls; want %v after 2", err, calls, stop)
	}
}
