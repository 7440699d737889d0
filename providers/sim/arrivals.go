package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// How a trace is scaled by rateScale K (the sim config's scaling).
const (
	// ScaleSuperpose replays K independent copies of the trace, each
	// shifted in time by a seeded random offset within ±shift (mirrored at
	// the trace's ends), the last one thinned to K's fraction: K
	// populations of users that follow the same envelope. The mean rate is
	// K times the trace's; bursts shorter than the shift decorrelate (a
	// per-second CV about 1/√K of the trace's own) while the rise and
	// fall above it are kept. See ShiftWhole for the whole-trace rotation.
	ScaleSuperpose = "superpose"
	// ScaleClone turns each arrival into K simultaneous requests (the
	// fraction of K as one more with that probability): the same mean
	// rate, with every burst of the trace K times as large.
	ScaleClone = "clone"
)

// ShiftWhole is the superposed copies' offset drawn anywhere in the
// trace: K rotations of it, whose sum is flat (the envelope is lost).
const ShiftWhole = -1

// DefaultShift bounds a superposed copy's offset when the config gives
// none: a minute, so one user's bursts (seconds) decorrelate across copies
// while the population's envelope (minutes and up) survives the sum.
const DefaultShift = 60

// How each request's service time is drawn (the sim config's
// serviceTimes).
const (
	// ServiceTokens scales each arrival's token count (ContextTokens +
	// GeneratedTokens) so that their mean is the workload's serviceTime.
	ServiceTokens = "tokens"
	// ServiceExponential draws each service time from an exponential
	// distribution of mean serviceTime (an M/M/c world).
	ServiceExponential = "exponential"
)

// Bounds of what the world simulates request by request.
const (
	// MaxCopies bounds the copies a superposed trace replays: each costs a
	// lookup every second.
	MaxCopies = 10_000
	// MaxArrivalsPerSecond bounds one workload's arrivals in one second
	// (estimated from the trace's busiest second before the world starts):
	// every request is simulated, so the cost of a virtual second grows
	// with it.
	MaxArrivalsPerSecond = 100_000
)

// arrival is one request: when it came (seconds since the world's start)
// and its service time as a multiple of the workload's serviceTime.
type arrival struct {
	at, cost float64
}

// source generates a workload's arrivals second by second, from its trace
// and the explicit transformations. It is deterministic: the draws that
// decide whether an arrival of an arrival trace is kept are keyed by
// (seed, copy, row), the others come from one seeded stream consumed in
// second order.
type source struct {
	tr      *Trace
	offsets []int     // superpose: each copy's shift in seconds
	mirror  bool      // superpose: offsets are bounded and mirror at the ends
	keep    []float64 // superpose: each copy's keep probability
	clones  int       // clone: whole clones of every arrival
	frac    float64   // clone: probability of one more
	keepOne float64   // clone: an arrival's keep probability (thin × share)
	clone   bool
	exp     bool
	rate    float64 // rate traces: the Poisson rate is Rate × this
	// expect turns the trace's Rate into the requests a second this
	// source makes on average (Rate carries the first loader's
	// rateScale and thin; this source's own replace them).
	expect float64
	seed   uint64
	rng    *rand.Rand
}

// newSource prepares the replay of tr for a workload receiving share of it.
// Its rates and arrivals are those of the file (and window): k (rateScale)
// and thin are applied here.
// shift bounds each superposed copy's offset in seconds (ShiftWhole:
// anywhere in the trace; 0: no shift).
func newSource(tr *Trace, scaling, service string, k, thin, share float64, shift int, seed uint64) (*source, error) {
	src := &source{tr: tr, seed: seed, rng: rand.New(rand.NewPCG(seed, 0xa771))}
	// A rate trace's rates were multiplied by the trace's own options.
	base := 1 / tr.factor()
	switch service {
	case ServiceTokens:
		if !tr.HasTokens() {
			return nil, fmt.Errorf("serviceTimes %q: the trace has no ContextTokens or GeneratedTokens column (use %q)", service, ServiceExponential)
		}
	case ServiceExponential:
		src.exp = true
	case "":
		src.exp = !tr.HasTokens()
	default:
		return nil, fmt.Errorf("serviceTimes %q: want %q or %q", service, ServiceTokens, ServiceExponential)
	}
	if peak := tr.Peak() * k * share; peak > MaxArrivalsPerSecond {
		return nil, fmt.Errorf("the trace's busiest second (%.0f) × rateScale %v × share %v is %.0f requests: the world simulates each request and runs at most %d a second per workload; lower rateScale or share",
			tr.Peak(), k, share, peak, MaxArrivalsPerSecond)
	}
	src.expect = base * k * thin * share
	switch scaling {
	case ScaleSuperpose, "":
		n := int(math.Ceil(k - 1e-9))
		if n > MaxCopies {
			return nil, fmt.Errorf("scaling %q with rateScale %v replays %d copies of the trace, more than %d (use scaling %q)", ScaleSuperpose, k, n, MaxCopies, ScaleClone)
		}
		n = max(n, 1)
		draw := rand.New(rand.NewPCG(seed, 0x5f1f7))
		d := len(tr.Rate)
		for j := range n {
			off := 0
			switch {
			case j == 0 || d == 0:
			case shift == ShiftWhole || shift >= d:
				off = draw.IntN(d) // a rotation: second() wraps
			case shift > 0:
				// Within ±shift; second() mirrors at the trace's ends,
				// so a copy's edge minutes are its neighbours', not the
				// other end's.
				off = draw.IntN(2*shift+1) - shift
				src.mirror = true
			}
			p := thin * share
			if j == n-1 && k-float64(n-1) < 1 {
				p *= k - float64(n-1)
			}
			src.offsets = append(src.offsets, off)
			src.keep = append(src.keep, p)
		}
		// A rate trace is already an intensity: K independent Poisson
		// streams of it are one stream of K times the rate.
		src.rate = base * k * thin * share
	case ScaleClone:
		src.clone = true
		src.clones = int(k)
		src.frac = k - float64(src.clones)
		src.keepOne = thin * share
		src.rate = base * thin * share
	default:
		return nil, fmt.Errorf("scaling %q: want %q or %q", scaling, ScaleSuperpose, ScaleClone)
	}
	return src, nil
}

// unit is a uniform draw in [0, 1) keyed by (seed, a, b): SplitMix64's
// finaliser over the key, so a draw depends on nothing else.
func unit(seed, a, b uint64) float64 {
	z := seed ^ (a+0x9e3779b97f4a7c15)*0xbf58476d1ce4e5b9 ^ (b+0x632be59bd9b4e5b3)*0x94d049bb133111eb
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}

// cost is arrival i's service time as a multiple of the mean.
func (src *source) cost(i int) float64 {
	if src.exp {
		return src.rng.ExpFloat64()
	}
	return float64(src.tr.tokens[i]) / src.tr.meanTokens
}

// second appends second s's arrivals to buf, in time order.
func (src *source) second(s int, buf []arrival) []arrival {
	tr := src.tr
	d := len(tr.Rate)
	if s < 0 || s >= d {
		return buf
	}
	start := len(buf)
	if tr.first == nil {
		lambda := tr.Rate[s] * src.rate
		buf = src.poisson(s, lambda, buf)
		if src.clone {
			buf = src.cloneAll(buf, start, s)
		}
		return buf
	}
	if src.clone {
		for i := tr.first[s]; i < tr.first[s+1]; i++ {
			row := uint64(tr.row0) + uint64(i)
			if unit(src.seed, 0, row) >= src.keepOne {
				continue
			}
			n := src.clones
			if unit(src.seed, 1, row) < src.frac {
				n++
			}
			a := arrival{at: float64(s) + float64(tr.offset[i])}
			for range n {
				a.cost = src.cost(int(i))
				buf = append(buf, a)
			}
		}
		return buf
	}
	for j, off := range src.offsets {
		b := s - off
		switch {
		case src.mirror && b < 0:
			b = -b - 1
		case src.mirror && b >= d:
			b = 2*d - b - 1
		case b < 0:
			b += d
		case b >= d:
			b -= d
		}
		p := src.keep[j]
		for i := tr.first[b]; i < tr.first[b+1]; i++ {
			if p < 1 && unit(src.seed, uint64(j)+2, uint64(tr.row0)+uint64(i)) >= p {
				continue
			}
			buf = append(buf, arrival{at: float64(s) + float64(tr.offset[i]), cost: src.cost(int(i))})
		}
	}
	if len(src.offsets) > 1 {
		part := buf[start:]
		slices.SortFunc(part, func(x, y arrival) int {
			switch {
			case x.at < y.at:
				return -1
			case x.at > y.at:
				return 1
			}
			return 0
		})
	}
	return buf
}

// poisson appends the arrivals of a Poisson stream of rate lambda over
// second s, by exponential gaps (so their count is Poisson and their times
// uniform), each with an exponential cost.
func (src *source) poisson(s int, lambda float64, buf []arrival) []arrival {
	if !(lambda > 0) {
		return buf
	}
	t := src.rng.ExpFloat64() / lambda
	for t < 1 {
		buf = append(buf, arrival{at: float64(s) + t, cost: src.rng.ExpFloat64()})
		t += src.rng.ExpFloat64() / lambda
	}
	return buf
}

// cloneAll turns each arrival of buf[start:] into its clones.
func (src *source) cloneAll(buf []arrival, start, s int) []arrival {
	orig := slices.Clone(buf[start:])
	buf = buf[:start]
	for i, a := range orig {
		n := src.clones
		if unit(src.seed, 1, uint64(s)<<20|uint64(i)) < src.frac {
			n++
		}
		for range n {
			buf = append(buf, a)
		}
	}
	return buf
}
