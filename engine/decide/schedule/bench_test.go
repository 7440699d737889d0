package schedule

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkDecide10000: one tick's decisions for 10,000 Schedules, each
// with two wake-ups, two time-of-day timeouts, in dependency chains of
// three, and a trigger
// with the HPA's default-like behavior. Goal: ≤ 50 ms.
func BenchmarkDecide10000(b *testing.B) {
	loc, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC)
	ws := make([]Workload, 10000)
	for i := range ws {
		ws[i] = Workload{Name: fmt.Sprintf("w%05d", i), Activity: now.Add(-time.Duration(i%600) * time.Second), Current: i % 5, Ready: i % 5,
			Min: 0, AtStart: 1, Idle: 5 * time.Minute, Loc: loc,
			WakeUps: []TimeOfDay{{8, 0}, {13, 30}}, ByTime: []TimeoutFrom{{TimeOfDay{8, 0}, 30 * time.Minute}, {TimeOfDay{19, 0}, 5 * time.Minute}}}
		if i%3 != 0 { // chains of three: web → api → db
			ws[i].DependsOn = []string{ws[i-1].Name}
		}
	}
	beh := Behavior{
		Up:   Rules{Select: SelectMax, Policies: []Policy{{Percent, 100, 15 * time.Second}, {Pods, 4, 15 * time.Second}}},
		Down: Rules{Stabilization: 300 * time.Second, Select: SelectMin, Policies: []Policy{{Percent, 50, 30 * time.Second}}},
	}
	trig := []Trigger{{Name: "rps", Type: AverageValue, Target: 50}}
	hist := make([]History, len(ws))
	for b.Loop() {
		zs := DecideZero(now, ws)
		for i, w := range ws {
			_, hist[i], _ = Decide(Input{Now: now, Zero: zs[w.Name], Current: w.Current, Max: 10, AtStart: 1,
				Triggers: trig, Readings: []Reading{{Value: float64(i % 300), OK: true}}, Tolerance: 0.1, Behavior: beh, History: hist[i]})
		}
	}
}
