package route

import (
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/setpoint-dev/setpoint/engine/decide/routegroup"
)

type counting struct{ at map[int64]int }

func (c *counting) AppendCached(_ labels.Labels, _ *any, t int64, _ float64) error {
	c.at[t]++
	return nil
}

// A recorder with Every writes a tick's series at most that often: three
// group series and three per backend, here for two backends.
func TestRecorderEvery(t *testing.T) {
	c := &counting{at: map[int64]int{}}
	r := Recorder{Namespace: "shop", Name: "vip", Every: time.Second}
	d := routegroup.Decision{Regime: routegroup.Laminar, Names: []string{"a", "b"}, Weights: []float64{0.5, 0.5}, Slots: []int{3, 4}, Pressure: []float64{0, 0}}
	t0 := time.UnixMilli(1_000_000)
	for i := range 11 {
		r.Record(c, t0.Add(time.Duration(i)*200*time.Millisecond), d, routegroup.State{})
	}
	want := map[int64]int{t0.UnixMilli(): 9, t0.Add(time.Second).UnixMilli(): 9, t0.Add(2 * time.Second).UnixMilli(): 9}
	if len(c.at) != len(want) {
		t.Fatalf("recorded at %v, want once a second: %v", c.at, want)
	}
	for ts, n := range want {
		if c.at[ts] != n {
			t.Errorf("at %d: %d samples, want %d", ts, c.at[ts], n)
		}
	}
}
