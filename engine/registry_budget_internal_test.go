package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/setpoint-dev/setpoint/engine/signals"
	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
)

// A spec's own queries are charged to its budget whichever way it asks
// (Query, or OwnBy for a grouped one such as a Fleet's per-cluster
// queries); the grouped defaults every spec shares (By) are not.
func TestOwnQueriesAreChargedToTheSpec(t *testing.T) {
	store := embedded.NewStore(time.Hour)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []string{"a", "b", "c", "d"} {
		if _, err := store.Append(labels.FromStrings("__name__", "m", "cluster", c), at.UnixMilli(), 1); err != nil {
			t.Fatal(err)
		}
	}
	tick := &Tick{Ctx: context.Background(), Now: at, Source: embedded.NewSource(store)}
	// 432,001 steps × 4 series each: some 1.7M samples, two past 2M.
	q1, q2, q3 := "sum by (cluster) (max_over_time(m[5d:1s]))", "sum by (cluster) (min_over_time(m[5d:1s]))", "sum by (cluster) (avg_over_time(m[5d:1s]))"
	tick.forSpec()
	if _, _, err := tick.OwnBy(q1, "cluster"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tick.OwnBy(q2, "cluster"); !errors.Is(err, signals.ErrBudget) {
		t.Fatalf("the spec's second grouped query must be past its budget: %v", err)
	}
	if _, err := tick.Query(q3); !errors.Is(err, signals.ErrBudget) {
		t.Fatalf("and so must a third through Query: %v", err)
	}
	// A grouped default is the tick's, not the spec's.
	if _, _, err := tick.By(q2, "cluster"); err != nil {
		t.Fatalf("a shared query is not the spec's to pay: %v", err)
	}
	// The next spec starts with a whole budget.
	tick.forSpec()
	if _, err := tick.Query(q3); err != nil {
		t.Fatalf("another spec's budget: %v", err)
	}
}
