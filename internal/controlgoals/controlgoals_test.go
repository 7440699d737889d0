package controlgoals

import (
	"reflect"
	"strings"
	"testing"
)

func TestMissed(t *testing.T) {
	base := Row{Setpoint: Variant{OverPct: 2, ReplicaHours: 4}, HPA: Variant{OverPct: 3, ReplicaHours: 3.9},
		Fixed: Variant{Fixed: 5, ReplicaHours: 5}, Oracle: 3.2}
	cases := []struct {
		name string
		edit func(*Row)
		want []string
	}{
		// 4 ≤ 0.85 × 5 = 4.25 and 4 ≤ 1.3 × 3.2 = 4.16.
		{"all met", func(*Row) {}, nil},
		{"over 5%", func(r *Row) { r.Setpoint.OverPct, r.HPA.OverPct = 5.1, 9 }, []string{"over 5.1% > 5%"}},
		{"over the HPA", func(r *Row) { r.HPA.OverPct = 1.9 }, []string{"over 2.0% > the HPA's 1.9%"}},
		// 4.3 > 4.25 and > 4.16.
		{"dear", func(r *Row) { r.Setpoint.ReplicaHours = 4.3 }, []string{"4.30 replica-hours > 0.85 × fixed 5's 5.00", "4.30 replica-hours > 1.3 × the oracle's 3.20"}},
		// No fixed count as good: that goal has nothing to compare with.
		{"no fixed", func(r *Row) { r.Fixed.Fixed, r.Setpoint.ReplicaHours = -200, 4.2 }, []string{"4.20 replica-hours > 1.3 × the oracle's 3.20"}},
	}
	for _, c := range cases {
		r := base
		c.edit(&r)
		var got []string
		for _, m := range r.Missed() {
			got = append(got, m.Text)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestRead(t *testing.T) {
	out := []byte(`{"workloads":[{"workload":"shop/checkout","overExactPct":1.5,"replicaHours":4.1}],
"baselines":[{"name":"autoscalers alone (observe)","workloads":[{"overExactPct":3,"replicaHours":3.9}]},
{"name":"fixed","workloads":[{"overExactPct":0,"replicaHours":5,"fixedReplicas":5}]},
{"name":"oracle","workloads":[{"replicaHours":3.2,"oracle":{"reactive":[{"overPct":8,"replicaHours":3},{"overPct":4.9,"replicaHours":4.4},{"overPct":0,"replicaHours":5}]}}]}]}`)
	r, err := Read(out, "")
	if err != nil {
		t.Fatal(err)
	}
	want := Row{Workload: "shop/checkout", Setpoint: Variant{OverPct: 1.5, ReplicaHours: 4.1}, HPA: Variant{OverPct: 3, ReplicaHours: 3.9},
		Fixed: Variant{ReplicaHours: 5, Fixed: 5}, Oracle: 3.2, Reactive: 4.4}
	if r != want {
		t.Fatalf("%+v, want %+v", r, want)
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
