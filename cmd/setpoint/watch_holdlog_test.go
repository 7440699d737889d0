package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/watch"
	"github.com/setpoint-dev/setpoint/internal/testutil"
)

// TestWatchSaysAHoldAgainWhenItReturns drives the reconcile watch runs
// (whose plans are never written out, so their Specs and Observed stay
// empty): checkout's increase is held by its window and said once; aimed
// at a Deployment that does not exist, checkout holds nothing and warns;
// aimed back, the hold that ended and returned is said again, and the
// warning is said to have cleared.
func TestWatchSaysAHoldAgainWhenItReturns(t *testing.T) {
	ws, clk, q, set := reconcileRig(t)
	const id = "NFR/shop/checkout"
	l, err := newLoader(context.Background(), defaultCUELimits())
	if err != nil {
		t.Fatal(err)
	}
	r := l.LoadDir(copySpecs(t, [3]string{"checkout.nfr.yaml", "{kind: Deployment, name: checkout}", "{kind: Deployment, name: nosuch}"}))
	astray := watch.Set{Env: set.Env, Incomplete: set.Incomplete}
	for _, d := range set.Specs {
		if d.Head().ID() == id {
			for _, e := range r.Documents {
				if e.Head().ID() == id {
					d = e
				}
			}
		}
		astray.Specs = append(astray.Specs, d)
	}
	if !strings.Contains(astray.Select([]string{id})[0].(*spec.NFR).Spec.Target.Name, "nosuch") {
		t.Fatal("the edited checkout was not loaded")
	}

	var out testutil.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&out, nil)))
	defer slog.SetDefault(prev)
	said := &logged{}
	const hold = "msg=held reason=test address=sim:HorizontalPodAutoscaler/shop/checkout attribute=spec.minReplicas"
	step := func(s watch.Set, holds, warnings, cleared int) {
		t.Helper()
		reconcileKeys(context.Background(), ws, q, s, []string{id}, "test", clk, time.Second, said)
		got := out.String()
		if n := strings.Count(got, hold); n != holds {
			t.Fatalf("%d hold lines, want %d:\n%s", n, holds, got)
		}
		if n := strings.Count(got, "target sim:Deployment/shop/nosuch does not exist"); n != warnings {
			t.Fatalf("%d warnings, want %d:\n%s", n, warnings, got)
		}
		if n := strings.Count(got, "msg=\"notes cleared\" spec="+id); n != cleared {
			t.Fatalf("%d notes cleared, want %d:\n%s", n, cleared, got)
		}
	}
	step(set, 1, 0, 0)
	step(set, 1, 0, 0) // still held: not said again
	step(astray, 1, 1, 0)
	step(astray, 1, 1, 0) // still warned: not said again
	step(set, 2, 1, 1)
}
