package record

import (
	"context"
	"testing"
	"time"
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
