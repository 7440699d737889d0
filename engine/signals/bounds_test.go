package signals

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

var testParser = parser.NewParser(parser.Options{})

func TestCheckCost(t *testing.T) {
	for _, c := range []struct {
		query  string
		series int    // each selector matches this many (0: the static check)
		want   string // "" for accepted, else in the message
	}{
		{query: `sum(rate(http_requests_total[5m]))`},
		{query: `max_over_time(sum(rate(x[5m]))[30m:1m])`},
		{query: `max_over_time(sum(rate(x[5m]))[1d:15s])`},
		{query: `count_over_time(vector(1)[1y:1s])`, want: "the subquery at character 17 of the query, [1y:1s], makes some 63072002 samples (31536001 steps of 1s over 1y × 2 values held at each): past the query bound of 5000000 samples; a coarser step or a shorter range makes fewer"},
		// Just under and just over: 2,500,000 steps of two values.
		{query: `count_over_time(vector(1)[2499999s:1s])`},
		{query: `count_over_time(vector(1)[2500000s:1s])`, want: "makes some 5000002 samples"},
		// No step: the default evaluation interval.
		{query: `count_over_time(vector(1)[4y:])`},
		{query: `count_over_time(vector(1)[100y:])`, want: "steps of 1m over 100y"},
		// A nested subquery is evaluated over the outer one's range too.
		{query: `max_over_time(max_over_time(vector(1)[1h:1s])[1d:1h])`},
		{query: `max_over_time(max_over_time(vector(1)[1h:1s])[100d:1h])`, want: "[1h:1s], makes some 17287202 samples (8643601 steps of 1s over 100d1h"},
		// A range function over a nested subquery reads its window at each
		// outer step: 86401 × 86401 points here, few samples.
		{query: `sum_over_time(count_over_time(vector(1)[1d:1s])[1d:1s])`, want: "the range function over the subquery at character 31 of the query reads some 7465132801 points (86401 steps of the subquery around it, each of 1s, × 86401 points of its [1d:1s] window × 1 series): past the query bound of 500000000 points read"},
		{query: `sum_over_time(count_over_time(vector(1)[1h:1s])[1d:1m])`},
		// The series the selectors match.
		// rate's answer, 100 series at each step, is held while the sum
		// is made from it (as the engine counts them).
		{query: `max_over_time(sum(rate(x[5m]))[1d:1s])`, series: 10},
		{query: `max_over_time(sum(rate(x[5m]))[1d:1s])`, series: 100, want: "makes some 17280200 samples (86401 steps of 1s over 1d × 200 values held at each, its selectors matching 100 series)"},
		// An aggregation by labels may keep every series; "or" keeps both
		// sides'.
		{query: `max_over_time(sum(x)[1d:1m])`, series: 2000},
		{query: `max_over_time(sum by (pod) (x)[1d:1m])`, series: 2000, want: "× 4000 values held at each"},
		{query: `max_over_time((x or y)[1d:1m])`, series: 2000, want: "× 8000 values held at each"},
		{query: `max_over_time((x and y)[1d:1m])`, series: 2000, want: "× 6000 values held at each"},
		// Many subqueries, each under the bound, over it together.
		{query: `count_over_time(vector(1)[20d:1s]) + count_over_time(vector(1)[20d:1s])`, want: "makes some 3456002 samples (1728001 steps of 1s over 20d × 2 values held at each), the query's subqueries some 6912004 in all"},
		// Characters, not bytes.
		{query: `x{a="ä"} + count_over_time(vector(1)[1y:1s])`, want: "at character 28 of the query"},
	} {
		e, err := testParser.ParseExpr(c.query)
		if err != nil {
			t.Fatalf("%s: %v", c.query, err)
		}
		var series func(*parser.VectorSelector) int
		if c.series > 0 {
			series = func(*parser.VectorSelector) int { return c.series }
		}
		err = CheckCost(c.query, e, series)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.query, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.query, err, c.want)
		case c.want != "" && !errors.Is(err, ErrBound):
			t.Errorf("%s: %v is not ErrBound", c.query, err)
		}
	}
}
