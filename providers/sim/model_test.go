package sim

import (
	"math"
	"testing"
	"time"
)

func approx(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// TestStepHandComputed: 2 pods × 100 req/s, S = 50 ms, so c = 5 per pod.
func TestStepHandComputed(t *testing.T) {
	S := 50 * time.Millisecond
	cases := []struct {
		name                     string
		arrivals, backlog        float64
		served, dropped, carried float64
		wait, mean, p99          time.Duration
	}{
		// u = 0.5: m = 50 ms × (1 + 0.5/(5 × 0.5)) = 60 ms; p99 = 60 × ln 100.
		{"u=0.5", 100, 0, 100, 0, 0, 0, 60 * time.Millisecond, time.Duration(60e6 * math.Log(100))},
		// u = 0.95: m = 50 × (1 + 0.95/(5 × 0.05)) = 240 ms.
		{"u=0.95", 190, 0, 190, 0, 0, 0, 240 * time.Millisecond, time.Duration(240e6 * math.Log(100))},
		// u = 1.2: 200 served, 40 queue; served ones see u capped at 0.99:
		// m = 50 × (1 + 0.99/(5 × 0.01)) = 1040 ms.
		{"u=1.2", 240, 0, 200, 0, 40, 0, 1040 * time.Millisecond, time.Duration(1040e6 * math.Log(100))},
		// The next second at u=1.2: 40 queued ahead → 0.2 s of wait.
		{"u=1.2 with backlog", 240, 40, 200, 0, 80, 200 * time.Millisecond, 1040 * time.Millisecond, 200*time.Millisecond + time.Duration(1040e6*math.Log(100))},
		// The backlog holds at most 10 s of capacity (2,000); the rest drops.
		{"overflow", 400, 1900, 200, 100, 2000, 9500 * time.Millisecond, 1040 * time.Millisecond, 9500*time.Millisecond + time.Duration(1040e6*math.Log(100))},
	}
	for _, c := range cases {
		out := Step(SecondIn{Arrivals: c.arrivals, Backlog: c.backlog, Ready: 2, PerPodRPS: 100, ServiceTime: S})
		if !approx(out.Served, c.served, 1e-9) || !approx(out.Dropped, c.dropped, 1e-9) || !approx(out.Backlog, c.carried, 1e-9) {
			t.Errorf("%s: served %v dropped %v backlog %v; want %v %v %v", c.name, out.Served, out.Dropped, out.Backlog, c.served, c.dropped, c.carried)
		}
		if d := out.Wait - c.wait; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("%s: wait %v, want %v", c.name, out.Wait, c.wait)
		}
		if d := out.Mean - c.mean; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("%s: mean %v, want %v", c.name, out.Mean, c.mean)
		}
		if d := Quantile(0.99, out.Wait, out.Mean) - c.p99; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("%s: p99 %v, want %v", c.name, Quantile(0.99, out.Wait, out.Mean), c.p99)
		}
		if in := c.arrivals + c.backlog; !approx(in, out.Served+out.Dropped+out.Backlog, 1e-9) {
			t.Errorf("%s: %v in, %v accounted for", c.name, in, out.Served+out.Dropped+out.Backlog)
		}
	}
}

func TestStepWithoutPods(t *testing.T) {
	// A cold Knative service buffers up to 10 s of one pod's capacity.
	out := Step(SecondIn{Arrivals: 30, Ready: 0, PerPodRPS: 100, ServiceTime: 50 * time.Millisecond})
	if out.Served != 0 || out.Backlog != 30 || out.Dropped != 0 {
		t.Fatalf("%+v", out)
	}
	out = Step(SecondIn{Arrivals: 300, Backlog: 900, Ready: 0, PerPodRPS: 100, ServiceTime: 50 * time.Millisecond})
	if out.Backlog != 1000 || out.Dropped != 200 {
		t.Fatalf("%+v", out)
	}
}

func TestLatencyGrowsWithUtilisation(t *testing.T) {
	prev := time.Duration(0)
	for u := 0.0; u <= 1.0; u += 0.01 {
		m := SojournMean(50*time.Millisecond, 100, u)
		if m < prev {
			t.Fatalf("latency fell from %v to %v at u=%.2f", prev, m, u)
		}
		prev = m
	}
	if FractionWithin(0.1, 200*time.Millisecond, 50*time.Millisecond) != 0 {
		t.Fatal("nothing can finish before its wait")
	}
	if f := FractionWithin(math.Inf(1), 0, 50*time.Millisecond); f != 1 {
		t.Fatalf("everything finishes eventually: %v", f)
	}
}
