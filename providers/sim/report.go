package sim

import (
	"math"
	"slices"
	"time"
)

// Report is what the world measured for one workload, from every request
// it simulated: nothing in it comes from the metrics setpoint reads.
type Report struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Seconds simulated, and those with at least one request in the
	// trailing minute (where a p99 exists).
	Seconds  int   `json:"seconds"`
	Measured int   `json:"measured"`
	Arrived  int64 `json:"arrived"`
	Served   int64 `json:"served"`
	// Dropped were refused after waiting MaxWait (503s); Cold arrived when
	// no pod was ready and waited for one to start.
	Dropped int64 `json:"dropped"`
	Cold    int64 `json:"cold"`
	// PodSeconds counts every pod, starting or ready, each second (what
	// the replicas cost); ReadySeconds only the ready ones.
	PodSeconds   int64 `json:"podSeconds"`
	ReadySeconds int64 `json:"readySeconds"`
	// Targets are the latency targets reported on (seconds), each with
	// the requests over it (a dropped request is over every target) and
	// the seconds whose trailing-minute p99 was over it: exactly, from
	// every request's latency, and as a histogram_quantile over the
	// world's own histogram would say.
	Targets   []TargetReport `json:"targets"`
	Step      int            `json:"step"` // seconds between points
	Points    Points         `json:"points"`
	Histogram []float64      `json:"buckets"` // the histogram's upper bounds
	// Trace is the per-minute envelope of the rate the trace asks of the
	// workload (its rates, transformed and shared out); World that of the
	// requests the world made of it.
	Trace Shape `json:"traceShape"`
	World Shape `json:"worldShape"`
}

// TargetReport is one latency target's accounting.
type TargetReport struct {
	Target    float64 `json:"target"`
	Late      int64   `json:"late"`
	OverExact int     `json:"overExact"`
	OverHist  int     `json:"overHist"`
}

// Points are time series sampled every Step seconds from the start: ready
// pods at that second, arrivals per second over the step, and the p99 of
// the trailing minute from the histogram and exactly (NaN without
// requests; +Inf when more than 1% were dropped).
type Points struct {
	// Envelope is the rate the trace asks of the workload, averaged over
	// the minute holding the point (req/s): the shape the world follows.
	Envelope []float64 `json:"envelope,omitempty"`
	Ready    []float64 `json:"ready"`
	RPS      []float64 `json:"rps"`
	P99      []float64 `json:"p99"`
	P99Exact []float64 `json:"p99Exact"`
}

// MaxPoints bounds each series of a report: the step grows with the trace.
const MaxPoints = 2000

// reportStep is the step between points for a trace of d seconds.
func reportStep(d int) int { return max(ScrapeInterval, (d+MaxPoints-1)/MaxPoints) }

// secStat is one second of a workload.
type secStat struct {
	n    int32   // requests finished or refused (refused count as late)
	over []int32 // per target
	hist []int32 // served per bucket, not cumulative (last: +Inf)
	lats []float32
}

// tracker accumulates a workload's report second by second, with the
// trailing minute in a ring.
type tracker struct {
	r       Report
	buckets []float64
	ring    [60]secStat
	n       int64
	over    []int64
	hist    []int64
	cur     *secStat
	arrived int // arrivals in the current step
	scratch []float32
	// world is the per-minute envelope of arrivals; secArrived this
	// second's.
	world      shapeAcc
	secArrived int
	// envelope is the trace's per-minute rate for the workload.
	envelope []float64
	// lean keeps only the request and pod counts (Options.NoReport).
	lean bool
}

func newTracker(namespace, name string, targets, buckets []float64, duration int) *tracker {
	t := &tracker{buckets: buckets, over: make([]int64, len(targets)), hist: make([]int64, len(buckets)+1)}
	t.r = Report{Namespace: namespace, Name: name, Step: reportStep(duration), Histogram: slices.Clone(buckets)}
	for _, tg := range targets {
		t.r.Targets = append(t.r.Targets, TargetReport{Target: tg})
	}
	return t
}

// counted readies c for its first count: a second's tallies are made when
// it has one (a quiet workload's seconds have none, and cost no memory).
func (t *tracker) counted(c *secStat) {
	if c.hist == nil {
		c.over, c.hist = make([]int32, len(t.over)), make([]int32, len(t.hist))
	}
}

// begin opens second s, dropping the second a minute before it from the
// trailing sums.
func (t *tracker) begin(s int) {
	if t.lean {
		return
	}
	c := &t.ring[s%60]
	t.cur = c
	if c.n == 0 {
		// Nothing was counted in it (served and dropped count n with
		// every other tally): an idle second, as most are in a world of
		// many quiet workloads.
		return
	}
	t.n -= int64(c.n)
	for i, v := range c.over {
		t.over[i] -= int64(v)
		c.over[i] = 0
	}
	for i, v := range c.hist {
		t.hist[i] -= int64(v)
		c.hist[i] = 0
	}
	c.n, c.lats = 0, c.lats[:0]
}

func (t *tracker) arrive(cold bool) {
	t.r.Arrived++
	t.arrived++
	t.secArrived++
	if cold {
		t.r.Cold++
	}
}

// served records a request served with latency lat (seconds).
func (t *tracker) served(lat float64) {
	t.r.Served++
	if t.lean {
		return
	}
	c := t.cur
	t.counted(c)
	c.n++
	for i, tr := range t.r.Targets {
		if lat > tr.Target {
			c.over[i]++
			t.r.Targets[i].Late++
		}
	}
	b, _ := slices.BinarySearch(t.buckets, lat)
	c.hist[b]++
	c.lats = append(c.lats, float32(lat))
}

// dropped records a refused request: late for every target.
func (t *tracker) dropped() {
	t.r.Dropped++
	if t.lean {
		return
	}
	c := t.cur
	t.counted(c)
	c.n++
	for i := range t.r.Targets {
		c.over[i]++
		t.r.Targets[i].Late++
	}
	c.lats = append(c.lats, float32(math.Inf(1)))
}

// end closes second s with the pods it had.
func (t *tracker) end(s, pods, ready int) {
	if t.lean {
		t.r.Seconds++
		t.r.PodSeconds += int64(pods)
		t.r.ReadySeconds += int64(ready)
		return
	}
	c := t.cur
	if c.n > 0 {
		t.n += int64(c.n)
		for i, v := range c.over {
			t.over[i] += int64(v)
		}
		for i, v := range c.hist {
			t.hist[i] += int64(v)
		}
	}
	t.world.add(float64(t.secArrived))
	t.secArrived = 0
	t.r.Seconds++
	t.r.PodSeconds += int64(pods)
	t.r.ReadySeconds += int64(ready)
	if t.n > 0 {
		t.r.Measured++
		hp := t.histP99()
		for i := range t.r.Targets {
			if p99Over(t.n, t.over[i]) {
				t.r.Targets[i].OverExact++
			}
			if hp > t.r.Targets[i].Target {
				t.r.Targets[i].OverHist++
			}
		}
	}
	// Past MaxPoints (a world run on past its trace's end) the series
	// stop: the report stays bounded.
	if (s+1)%t.r.Step == 0 && len(t.r.Points.Ready) < MaxPoints {
		p := &t.r.Points
		if m := s / 60; m < len(t.envelope) {
			p.Envelope = append(p.Envelope, t.envelope[m])
		} else {
			p.Envelope = append(p.Envelope, math.NaN())
		}
		p.Ready = append(p.Ready, float64(ready))
		p.RPS = append(p.RPS, float64(t.arrived)/float64(t.r.Step))
		t.arrived = 0
		p.P99 = append(p.P99, t.histP99())
		p.P99Exact = append(p.P99Exact, t.exactP99())
	}
}

// rank is the nearest rank of the 99th percentile of n values.
func rank(n int64) int64 { return (99*n + 99) / 100 }

// p99Over says whether the nearest-rank p99 of n latencies, over of them
// above a target, is above it: the p99 is the k-th smallest, k =
// ceil(0.99 n), so it is over when fewer than k are within. The world's
// report and the oracle's replay judge a second by it alike.
func p99Over(n, over int64) bool { return n > 0 && n-over < rank(n) }

// histP99 is histogram_quantile(0.99, …) over the trailing minute's
// served requests, as Prometheus computes it: linear within the bucket
// holding the rank, the highest finite bound when it falls in +Inf, NaN
// without requests.
func (t *tracker) histP99() float64 {
	var total int64
	for _, v := range t.hist {
		total += v
	}
	if total == 0 {
		return math.NaN()
	}
	r := 0.99 * float64(total)
	var cum int64
	for i, v := range t.hist {
		if float64(cum+v) >= r && v > 0 {
			if i == len(t.buckets) {
				return t.buckets[len(t.buckets)-1]
			}
			lo := 0.0
			if i > 0 {
				lo = t.buckets[i-1]
			}
			return lo + (t.buckets[i]-lo)*(r-float64(cum))/float64(v)
		}
		cum += v
	}
	return t.buckets[len(t.buckets)-1]
}

// exactP99 is the nearest-rank p99 of the trailing minute's requests.
func (t *tracker) exactP99() float64 {
	if t.n == 0 {
		return math.NaN()
	}
	all := t.scratch[:0]
	for i := range t.ring {
		all = append(all, t.ring[i].lats...)
	}
	t.scratch = all
	return float64(nth(all, int(rank(int64(len(all))))-1))
}

// nth returns the k-th smallest of a (from 0), reordering a: Hoare's
// selection with a middle pivot, linear on average.
func nth(a []float32, k int) float32 {
	lo, hi := 0, len(a)-1
	for lo < hi {
		p := a[lo+(hi-lo)/2]
		i, j := lo, hi
		for i <= j {
			for a[i] < p {
				i++
			}
			for a[j] > p {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return a[k]
		}
	}
	return a[k]
}

// bucketsWith is the histogram's bounds for a workload: the client libraries'
// defaults and every latency target, sorted, without duplicates.
func bucketsWith(targets []float64) []float64 {
	b := append(slices.Clone(Buckets), targets...)
	slices.Sort(b)
	return slices.Compact(b)
}

// seconds converts latency targets to seconds, positive ones only,
// sorted and without duplicates.
func seconds(ds []time.Duration) []float64 {
	out := make([]float64, 0, len(ds))
	for _, d := range ds {
		if d > 0 {
			out = append(out, d.Seconds())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
