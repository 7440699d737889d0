package sim

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

// recordingSink keeps every sample as text.
type recordingSink struct{ got []string }

func (r *recordingSink) AppendCached(l labels.Labels, _ *any, t int64, v float64) error {
	r.got = append(r.got, fmt.Sprintf("%s %d %v", l, t, v))
	return nil
}

// TestNoReportChangesNothingElse: a world that keeps no report writes the
// same samples as one that does, and counts the same requests; only the
// report's seconds and points are gone.
func TestNoReportChangesNothingElse(t *testing.T) {
	cfg := spec.SimConfig{Seed: 3, Workloads: []spec.SimWorkload{deployment("checkout", 2), deployment("inventory", 1)}}
	tr := constTrace(150, 600)
	run := func(noReport bool) (*recordingSink, *World) {
		sink := &recordingSink{}
		w, err := NewWithTrace(cfg, tr, Options{Sink: sink, NoReport: noReport})
		if err != nil {
			t.Fatal(err)
		}
		w.AdvanceTo(w.Now().Add(5 * time.Minute))
		return sink, w
	}
	full, fw := run(false)
	lean, lw := run(true)
	if len(full.got) < 1000 || !slices.Equal(full.got, lean.got) {
		t.Fatalf("the samples differ: %d and %d", len(full.got), len(lean.got))
	}
	for _, name := range []string{"checkout", "inventory"} {
		fr, _ := fw.Report("shop", name)
		lr, _ := lw.Report("shop", name)
		if fr.Arrived == 0 || fr.Arrived != lr.Arrived || fr.Served != lr.Served || fr.Dropped != lr.Dropped || fr.PodSeconds != lr.PodSeconds {
			t.Fatalf("%s: counts differ: %+v and %+v", name, fr, lr)
		}
		if len(fr.Points.P99Exact) == 0 || len(lr.Points.P99Exact) != 0 {
			t.Fatalf("%s: points %d with a report, %d without", name, len(fr.Points.P99Exact), len(lr.Points.P99Exact))
		}
	}
}
