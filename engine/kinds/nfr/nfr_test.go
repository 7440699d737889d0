package nfrkind

import (
	"slices"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/signals"
)

// TestPair keeps only the times both series have, in x's order.
func TestPair(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pt := func(min int, v float64) signals.Point {
		return signals.Point{T: t0.Add(time.Duration(min) * time.Minute), V: v}
	}
	x := []signals.Point{pt(0, 10), pt(1, 20), pt(2, 30), pt(4, 50)}
	y := []signals.Point{pt(1, 200), pt(2, 300), pt(3, 400), pt(4, 500)}
	xs, ys := pair(x, y)
	if !slices.Equal(xs, []float64{20, 30, 50}) || !slices.Equal(ys, []float64{200, 300, 500}) {
		t.Errorf("paired %v %v", xs, ys)
	}
	if xs, ys := pair(x, nil); len(xs) != 0 || len(ys) != 0 {
		t.Errorf("nothing to pair with: %v %v", xs, ys)
	}
}
