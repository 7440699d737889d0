package sim

import "math"

// Shape sums up a rate's per-minute envelope: the lowest, highest and mean
// per-minute rate (requests a second) over the whole minutes, and their
// coefficient of variation (standard deviation over mean). It is how a
// user sees whether the world kept the trace's rise and fall.
type Shape struct {
	Minutes int     `json:"minutes"`
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
	Mean    float64 `json:"mean"`
	CV      float64 `json:"cv"`
}

// shapeAcc accumulates whole minutes of a rate.
type shapeAcc struct {
	n                    int
	min, max, sum, sumSq float64
	cur                  float64 // this minute's requests so far
	secs                 int
}

// add counts one second's requests; every 60th closes a minute.
func (a *shapeAcc) add(requests float64) {
	a.cur += requests
	a.secs++
	if a.secs < 60 {
		return
	}
	a.minute(a.cur / 60)
	a.cur, a.secs = 0, 0
}

// minute counts one whole minute's rate.
func (a *shapeAcc) minute(r float64) {
	if a.n == 0 || r < a.min {
		a.min = r
	}
	if a.n == 0 || r > a.max {
		a.max = r
	}
	a.n++
	a.sum += r
	a.sumSq += r * r
}

func (a *shapeAcc) shape() Shape {
	if a.n == 0 {
		return Shape{}
	}
	n := float64(a.n)
	mean := a.sum / n
	s := Shape{Minutes: a.n, Min: a.min, Max: a.max, Mean: mean}
	if mean > 0 {
		s.CV = math.Sqrt(max(0, a.sumSq/n-mean*mean)) / mean
	}
	return s
}

// PerMinute is the mean rate of each whole minute of per-second rates.
func PerMinute(perSecond []float64) []float64 {
	out := make([]float64, 0, len(perSecond)/60)
	for i := 0; i+60 <= len(perSecond); i += 60 {
		var sum float64
		for _, r := range perSecond[i : i+60] {
			sum += r
		}
		out = append(out, sum/60)
	}
	return out
}

// minutesShape is the Shape of per-minute rates.
func minutesShape(perMinute []float64) Shape {
	var a shapeAcc
	for _, r := range perMinute {
		a.minute(r)
	}
	return a.shape()
}

// shapeOf is the Shape of per-second rates scaled by scale.
func shapeOf(perSecond []float64, scale float64) Shape {
	var a shapeAcc
	for _, r := range perSecond {
		a.add(r * scale)
	}
	return a.shape()
}
