package sim

import (
	"math"
	"time"
)

// The queueing model. The world simulates every request: a workload's
// requests go to one of its ready pods uniformly at random (as kube-proxy's
// default iptables mode picks an endpoint), and each pod serves them first
// come, first served with c = round(perPodRPS × serviceTime) servers (its
// concurrency), each request holding a server for its own service time.
// With Poisson arrivals and exponential service times a pod is exactly an
// M/M/c queue, whose waiting follows Erlang C; with the trace's arrivals
// and costs it is whatever they make it. Nothing here uses a formula for
// latency: a request's latency is when its server frees up, minus when it
// arrived.

// MaxWait is the longest a request waits for a server before it is
// refused (a 503), as a queue-proxy or load balancer with a bounded queue
// would; it also bounds what a pod keeps.
const MaxWait = 10.0 // seconds

// MaxGatewayTimeout bounds how long a workload's gateway holds a request
// for a ready pod, whatever the config says: every held request is kept.
const MaxGatewayTimeout = 10 * time.Minute

// servers is a pod's servers as a min-heap of the times each is free.
type servers []float64

// newServers makes c idle servers.
func newServers(c int) servers { return make(servers, max(c, 1)) }

// take gives a request arriving at `at` the first free server for
// `service` seconds: it returns when the request finishes, or ok false
// when it would start after deadline (and then holds nothing).
func (h servers) take(at, service, deadline float64) (finish float64, ok bool) {
	start := math.Max(at, h[0])
	if start > deadline {
		return 0, false
	}
	finish = start + service
	h[0] = finish
	// Sift the new root down.
	i, n := 0, len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h[r] < h[l] {
			m = r
		}
		if h[i] <= h[m] {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return finish, true
}

// concurrency is a pod's servers for a workload: requests it serves at
// once at its rated throughput.
func concurrency(perPodRPS, serviceTime float64) int {
	return max(1, int(math.Round(perPodRPS*serviceTime)))
}
