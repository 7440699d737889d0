package controlgoals

import (
	"reflect"
	"strings"
	"testing"
)

func TestMissed(t *testing.T) {
	base := Row{Setpoint: Variant{OverPct: 2, ReplicaHours: 4}, HPA: Variant{OverPct: 3, ReplicaHours: 3.9},
		Fixed: Variant{Fixed: 5, OverPct: 1, ReplicaHours: 5}, Oracle: 3.6,
		Reactive: []Point{{OverPct: 8, ReplicaHours: 3}, {OverPct: 2.5, ReplicaHours: 3.5}, {OverPct: 1.5, ReplicaHours: 3.9}, {OverPct: 0, ReplicaHours: 6}}}
	decline := Goals["decline"] // ≤ 4%, ≤ 1.15 × oracle, ≤ 0.80 × fixed
	bursty := Goals["on-off"]   // ≤ 5%, ≤ 1.05 × the reactive bound
	cases := []struct {
		name string
		goal Goal
		edit func(*Row)
		want []string
	}{
		// 4 ≤ 0.80 × 5 = 4 and 4 ≤ 1.15 × 3.6 = 4.14.
		{"decline met", decline, func(*Row) {}, nil},
		{"over 4%", decline, func(r *Row) { r.Setpoint.OverPct, r.HPA.OverPct = 4.1, 9 }, []string{"over 4.1% > 4%"}},
		{"over the HPA", decline, func(r *Row) { r.HPA.OverPct = 1.9 }, []string{"over 2.0% > the HPA's 1.9%"}},
		// 4.2 > 0.80 × 5 = 4 and > 4.14.
		{"dear", decline, func(r *Row) { r.Setpoint.ReplicaHours = 4.2 }, []string{"4.20 replica-hours > 0.80 × fixed 5's 5.00", "4.20 replica-hours > 1.15 × the oracle's 3.60"}},
		// A fixed count as good and no dearer dominates, even at equal cost.
		{"dominated", Goal{}, func(r *Row) { r.Fixed.ReplicaHours = 4 }, []string{"fixed 5 dominates: 1.0% over ≤ 2.0% at 4.00 ≤ 4.00 replica-hours"}},
		// No fixed count as good: those goals have nothing to compare with.
		{"no fixed", decline, func(r *Row) { r.Fixed.Fixed, r.Setpoint.ReplicaHours = -200, 4.2 }, []string{"4.20 replica-hours > 1.15 × the oracle's 3.60"}},
		// At 2% over the bound is the 1.5% member's 3.9: 4 ≤ 1.05 × 3.9 = 4.095.
		{"bursty met", bursty, func(*Row) {}, nil},
		// At 3% over the 2.5% member's 3.5 is the bound: 4 > 3.675.
		{"bursty dear", bursty, func(r *Row) { r.Setpoint.OverPct = 3 }, []string{"4.00 replica-hours > 1.05 × the reactive bound's 3.50 at ≤ 3.0% over"}},
		{"bursty over", bursty, func(r *Row) { r.Setpoint.OverPct, r.HPA.OverPct = 5.5, 9 }, []string{"over 5.5% > 5%", "4.00 replica-hours > 1.05 × the reactive bound's 3.50 at ≤ 5.5% over"}},
		{"no reactive member", bursty, func(r *Row) { r.Reactive = r.Reactive[:1] }, []string{"no member of the reactive family is at or below 2.0% over"}},
	}
	for _, c := range cases {
		r := base
		c.edit(&r)
		var got []string
		for _, m := range r.Missed(c.goal) {
			got = append(got, m.Text)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestGoalsTable(t *testing.T) {
	// The table, as written before the policy changed.
	want := map[string]Goal{
		"decline":     {4, 1.15, 0.80, 0},
		"diurnal":     {1, 1.15, 0, 0},
		"flash-crowd": {4, 1.25, 0, 0},
		"shipped-5m":  {3, 1.20, 0, 0},
		"on-off":      {5, 0, 0, 1.05},
		"heavy-tail":  {5, 0, 0, 1.05},
	}
	if !reflect.DeepEqual(Goals, want) {
		t.Fatalf("%+v, want %+v", Goals, want)
	}
}

func TestRead(t *testing.T) {
	out := []byte(`{"workloads":[{"workload":"shop/checkout","overExactPct":1.5,"replicaHours":4.1}],
"baselines":[{"name":"autoscalers alone (observe)","workloads":[{"overExactPct":3,"replicaHours":3.9}]},
{"name":"setpoint defaults","workloads":[{"overExactPct":2,"replicaHours":4.4}]},
{"name":"fixed","workloads":[{"overExactPct":0,"replicaHours":5,"fixedReplicas":5}]},
{"name":"oracle","workloads":[{"replicaHours":3.2,"oracle":{"reactive":[{"overPct":0,"replicaHours":5},{"overPct":8,"replicaHours":3},{"overPct":4.9,"replicaHours":4.4}]}}]}]}`)
	r, err := Read(out, "")
	if err != nil {
		t.Fatal(err)
	}
	want := Row{Workload: "shop/checkout", Setpoint: Variant{OverPct: 1.5, ReplicaHours: 4.1}, HPA: Variant{OverPct: 3, ReplicaHours: 3.9},
		Fixed: Variant{ReplicaHours: 5, Fixed: 5}, Oracle: 3.2, Default: &Variant{OverPct: 2, ReplicaHours: 4.4},
		Reactive: []Point{{8, 3}, {4.9, 4.4}, {0, 5}}}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("%+v, want %+v", r, want)
	}
	if b, ok := r.ReactiveAt(5); !ok || b != 4.4 {
		t.Fatalf("the bound at 5%%: %v %v, want 4.4", b, ok)
	}
	if _, err := Read([]byte(`{"workloads":[{"workload":"a"}]}`), ""); err == nil {
		t.Fatal("a summary without baselines was read")
	}
	// Without the HPA's row there is nothing to hold the time over to.
	noHPA := []byte(strings.Replace(string(out), `"autoscalers alone (observe)"`, `"something else"`, 1))
	if _, err := Read(noHPA, ""); err == nil || !strings.Contains(err.Error(), "autoscalers alone") {
		t.Fatalf("a summary without the HPA's row: %v", err)
	}
}
