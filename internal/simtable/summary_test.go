package simtable

import (
	"math"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/internal/controlgoals"
	"github.com/setpoint-dev/setpoint/providers/sim"
)

// The table's rows and ratios, worked by hand: the oracle's schedule of
// 2, 6 and 3 pods costs 10,800 pod-seconds (3 replica-hours); setpoint's
// 4.5 are 1.50 of it, the fixed 6 pods' 6.0 are 2.00.
func TestTable(t *testing.T) {
	web := func(r WorkloadResult) WorkloadResult {
		r.Workload, r.Target = "shop/web", "250ms"
		return r
	}
	s := Summary{
		Workloads: []WorkloadResult{web(WorkloadResult{OverExact: 3.1, OverHist: 3.25, Late: 0.15, ReplicaHours: 4.5, Applies: 7, Dropped: 2})},
		Baselines: []Variant{
			{Name: controlgoals.BaselineFixed, Workloads: []WorkloadResult{web(WorkloadResult{Fixed: 6, ReplicaHours: 6})}},
			{Name: controlgoals.BaselineOracle, Workloads: []WorkloadResult{web(WorkloadResult{ReplicaHours: 3,
				Oracle: &sim.Oracle{Greedy: true, Replicas: []int{2, 6, 3}, PodSeconds: 10800}})}},
		},
	}
	// Columns are padded: compare each row's words.
	var rows []string
	for _, l := range strings.Split(s.Table(), "\n") {
		rows = append(rows, strings.Join(strings.Fields(l), " "))
	}
	got := strings.Join(rows, "\n")
	for _, want := range []string{
		"shop/web (p99 ≤ 250ms) time over exact / hist late dropped cold replica-h applies ÷ oracle",
		"setpoint 3.1% / 3.2% 0.15% 2 0 4.50 7 1.50",
		"fixed 6 pods (as good as setpoint) 0.0% / 0.0% 0.00% 0 0 6.00 0 2.00",
		"oracle (2–6 pods, by the minute) 0.0% / - - 0 0 3.00 0 1.00",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("want the row %q in:\n%s", want, got)
		}
	}
}

// Result reads a report against its target: shares of the measured
// seconds and of the arrivals, and pod-seconds as replica-hours.
func TestResult(t *testing.T) {
	r := sim.Report{Namespace: "shop", Name: "web", Measured: 200, Arrived: 1000, PodSeconds: 7200,
		Targets: []sim.TargetReport{{Target: 0.5, OverExact: 99}, {Target: 0.25, OverExact: 10, OverHist: 12, Late: 3}}}
	got := Result(r, 250*1e6)
	if got.Workload != "shop/web" || got.Target != "250ms" || got.OverExact != 5 || got.OverHist != 6 || math.Abs(got.Late-0.3) > 1e-12 || got.ReplicaHours != 2 {
		t.Fatalf("Result: %+v", got)
	}
	if none := Result(r, 0); none.Target != "" || none.OverExact != 0 {
		t.Fatalf("without a target: %+v", none)
	}
}
