package schedule

import (
	"strings"
	"testing"
)

// TestReadingErrorSaid: a trigger whose query failed says how, where one
// without data says missing; both block a decrease alike.
func TestReadingErrorSaid(t *testing.T) {
	trs := []Trigger{{Name: "load", Type: AverageValue, Target: 10}, {Name: "queue", Type: AverageValue, Target: 10}}
	const bound = `evaluating "x": past the query bound of 5000000 samples`
	rec, why := Recommend(4, trs, []Reading{{Err: bound}, {}}, 0.1)
	if rec != 4 || !strings.Contains(why, "load: no usable value ("+bound+"): no decrease") || !strings.Contains(why, "queue: no usable value (missing): no decrease") {
		t.Fatalf("%d: %s", rec, why)
	}
}
