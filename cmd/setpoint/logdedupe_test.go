package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/plan"
)

func TestDedupeCollapsesRepeats(t *testing.T) {
	var out bytes.Buffer
	h := newDedupe(slog.NewTextHandler(&out, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}), time.Minute)
	log := slog.New(h)
	for range 5 {
		log.Error("plan", "error", "provider sim is down; it restarts at 12:00:01.000")
	}
	log.Info("applied", "to", "3")
	log.Info("applied", "to", "4") // other attrs: not a repeat
	got := out.String()
	want := `level=ERROR msg=plan error="provider sim is down; it restarts at 12:00:01.000"
level=ERROR msg="the line before repeated" line=plan times=4
level=INFO msg=applied to=3
level=INFO msg=applied to=4
`
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	if strings.Count(got, "restarts at") != 1 {
		t.Fatal("the repeats were written")
	}
}

func TestCompletionUnknownShellFails(t *testing.T) {
	if _, errOut, code := runCLI(t, "completion", "tcsh"); code != 1 || !strings.Contains(errOut, `unknown shell "tcsh"`) {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if out, _, code := runCLI(t, "completion", "bash"); code != 0 || !strings.Contains(out, "bash completion") {
		t.Fatalf("exit %d", code)
	}
}

// TestLogHoldsSaysEachHoldOnce: a hold is said when it starts and when it
// changes kind, not at every plan, and is forgotten once its spec is
// planned without it.
func TestLogHoldsSaysEachHoldOnce(t *testing.T) {
	var out bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&out, nil)))
	defer slog.SetDefault(prev)
	const id = "NFR/shop/x"
	a := addrs.Object{Provider: "sim", Kind: "Deployment", Namespace: "shop", Name: "x"}
	held := func(kind plan.HoldKind) *plan.Plan {
		return &plan.Plan{Held: []plan.Change{{Address: a, Attribute: addrs.MustPath("spec.replicas"), Spec: id, Held: &plan.Hold{Kind: kind}}}}
	}
	free := &plan.Plan{}
	asked := settled{asked: map[string]bool{id: true}, live: map[string]bool{id: true}}
	said := &logged{}
	for _, p := range []*plan.Plan{held(plan.HoldStability), held(plan.HoldStability), held(plan.HoldCooldown), free, held(plan.HoldCooldown)} {
		logHolds(p, said, "tick", asked)
	}
	if n := strings.Count(out.String(), "msg=held"); n != 3 {
		t.Fatalf("want 3 hold lines (stability, cooldown, cooldown again after it ended), got %d:\n%s", n, out.String())
	}
}

// TestWarningsSaidOnce: a source that stays down is said once, not every
// reconcile; once it is back that is said, and a new outage is said again.
func TestWarningsSaidOnce(t *testing.T) {
	var out bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&out, nil)))
	defer slog.SetDefault(prev)
	const id = "Schedule/shop/api"
	down := &plan.Plan{Notes: []plan.Note{{Severity: diag.Warning, Spec: id, Message: "activity: querying prometheus: connection refused"}}}
	up := &plan.Plan{}
	asked := settled{asked: map[string]bool{id: true}, live: map[string]bool{id: true}}
	said := &logged{}
	for _, p := range []*plan.Plan{down, down, down, up, up, down} {
		logWarnings(p, said, asked)
	}
	if n := strings.Count(out.String(), "connection refused"); n != 2 {
		t.Fatalf("want the outage said twice (once per outage), got %d:\n%s", n, out.String())
	}
	if n := strings.Count(out.String(), "notes cleared"); n != 1 {
		t.Fatalf("want its end said once, got %d:\n%s", n, out.String())
	}
}
