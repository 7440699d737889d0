package sim

import (
	"math"
	"time"
)

// The latency and queueing model, as pure functions of one second of one
// workload. Each ready pod serves up to perPodRPS requests per second with
// concurrency c = perPodRPS × serviceTime; a request's latency is the time
// it waited in the backlog carried from earlier seconds plus an exponential
// sojourn whose mean grows with utilisation u as in an M/M/c queue near
// saturation: m = S × (1 + u / (c × (1 − u))), u capped at 0.99.

// maxBacklogSeconds bounds the backlog: requests beyond this many seconds of
// capacity are dropped (a 503), as a load balancer's queue would.
const maxBacklogSeconds = 10

// SecondIn is one second of one workload.
type SecondIn struct {
	Arrivals    float64 // requests arriving this second
	Backlog     float64 // requests queued from earlier seconds
	Ready       int     // pods serving
	PerPodRPS   float64
	ServiceTime time.Duration
}

// SecondOut is what happened in that second.
type SecondOut struct {
	Served      float64
	Dropped     float64
	Backlog     float64       // carried to the next second
	Utilisation float64       // offered load / capacity, uncapped
	Wait        time.Duration // backlog delay every served request saw
	Mean        time.Duration // mean of the exponential part of latency
}

// Step runs one second of the queueing model.
func Step(in SecondIn) SecondOut {
	capacity := float64(in.Ready) * in.PerPodRPS
	demand := in.Arrivals + in.Backlog
	var out SecondOut
	if capacity <= 0 {
		// Nothing serves: everything waits (a Knative activator buffering
		// through a cold start) up to the bound.
		limit := maxBacklogSeconds * math.Max(in.PerPodRPS, 1)
		out.Backlog = math.Min(demand, limit)
		out.Dropped = demand - out.Backlog
		out.Utilisation = math.Inf(1)
		if demand == 0 {
			out.Utilisation = 0
		}
		return out
	}
	out.Utilisation = demand / capacity
	out.Served = math.Min(demand, capacity)
	rest := demand - out.Served
	limit := maxBacklogSeconds * capacity
	out.Backlog = math.Min(rest, limit)
	out.Dropped = rest - out.Backlog
	// Requests served this second first waited for the backlog ahead of
	// them to drain.
	out.Wait = time.Duration(in.Backlog / capacity * float64(time.Second))
	out.Mean = SojournMean(in.ServiceTime, in.PerPodRPS, out.Served/capacity)
	return out
}

// SojournMean is the mean time in service and queue for a pod at
// utilisation u.
func SojournMean(s time.Duration, perPodRPS, u float64) time.Duration {
	c := math.Max(perPodRPS*s.Seconds(), 1)
	u = math.Min(math.Max(u, 0), 0.99)
	return time.Duration(float64(s) * (1 + u/(c*(1-u))))
}

// Quantile of latency: wait + mean × ln(1/(1−q)).
func Quantile(q float64, wait, mean time.Duration) time.Duration {
	return wait + time.Duration(float64(mean)*math.Log(1/(1-q)))
}

// FractionWithin is the share of requests with latency ≤ le.
func FractionWithin(le float64, wait, mean time.Duration) float64 {
	x := le - wait.Seconds()
	if x <= 0 {
		return 0
	}
	if mean <= 0 {
		return 1
	}
	return 1 - math.Exp(-x/mean.Seconds())
}
