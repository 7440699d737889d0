// Package signals is how the engine reads every measurement: a PromQL
// expression evaluated at a time gives samples, or an explicit "no data".
// Missing series, NaN and Inf are never turned into 0: a decision that needs
// a value it does not have holds.
package signals

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Source evaluates PromQL. Implementations: the embedded store (embedded),
// later a Prometheus server and provider-fed values.
type Source interface {
	Query(ctx context.Context, expr string, at time.Time) (Result, error)
}

// Labels of one sample; the metric name is not included.
type Labels map[string]string

func (l Labels) String() string {
	keys := slices.Sorted(maps.Keys(l))
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%q", k, l[k])
	}
	b.WriteByte('}')
	return b.String()
}

// Sample is one value of a result, or one series of a matrix (Points).
type Sample struct {
	Labels Labels  `json:"labels"`
	Value  float64 `json:"value"`
	Points []Point `json:"points,omitempty"`
}

// Point is one value of a series at a time.
type Point struct {
	T time.Time `json:"t"`
	V float64   `json:"v"`
}

// Kind says whether a result came from a vector or a scalar expression.
type Kind string

// Result kinds.
const (
	Vector Kind = "vector"
	Scalar Kind = "scalar"
	// Matrix is a range vector (a subquery such as `(expr)[30m:1m]`):
	// each sample holds its series' points, never NaN or Inf.
	Matrix Kind = "matrix"
)

// Result is the outcome of one evaluation. Samples never hold NaN or Inf:
// those are counted in Dropped, so "no data" is explicit.
type Result struct {
	Expr    string
	At      time.Time
	Kind    Kind
	Samples []Sample
	Dropped int
}

// ErrNoData is wrapped by every error that means a value was not available.
var ErrNoData = errors.New("no data")

// NoData says why the result has no usable sample, or "" when it has some.
func (r Result) NoData() string {
	switch {
	case len(r.Samples) > 0:
		return ""
	case r.Dropped > 0:
		return fmt.Sprintf("%d samples were NaN or Inf", r.Dropped)
	default:
		return "no series matched"
	}
}

// Value returns the single value of a scalar or one-sample vector. It fails
// with ErrNoData when there is none and when several samples make the
// answer ambiguous.
func (r Result) Value() (float64, error) {
	if why := r.NoData(); why != "" {
		return 0, fmt.Errorf("%s at %s: %w: %s", r.Expr, r.At.UTC().Format(time.RFC3339), ErrNoData, why)
	}
	if len(r.Samples) > 1 {
		return 0, fmt.Errorf("%s: %d samples where one was expected", r.Expr, len(r.Samples))
	}
	if r.Kind == Matrix {
		return 0, fmt.Errorf("%s: a range of values where one was expected", r.Expr)
	}
	return r.Samples[0].Value, nil
}

// By indexes a vector result by the values of the given labels, joined by
// "/": how a grouped query is split back into per-workload values.
func (r Result) By(names ...string) map[string]float64 {
	out := make(map[string]float64, len(r.Samples))
	parts := make([]string, len(names))
	for _, s := range r.Samples {
		for i, n := range names {
			parts[i] = s.Labels[n]
		}
		out[strings.Join(parts, "/")] = s.Value
	}
	return out
}

// Usable reports whether v is a real number.
func Usable(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
