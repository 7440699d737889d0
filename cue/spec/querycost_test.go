package spec

import "testing"

// TestCheckPromQLCost: a query whose subqueries alone, at one series a
// selector, are past the sample bound is refused at validate, with the
// position and the bound.
func TestCheckPromQLCost(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{`max_over_time(sum(rate(http_requests_total[5m]))[30m:1m])`, ""},
		{`max_over_time(sum(rate(http_requests_total[5m]))[1d:1s])`, ""},
		{`count_over_time(vector(1)[1y:1s])`, "the subquery at character 17 of the query, [1y:1s], makes some 63072002 samples (31536001 steps of 1s over 1y × 2 values held at each): past the query bound of 5000000 samples; a coarser step or a shorter range makes fewer"},
		{`sum(x) + max_over_time(x[100y:])`, "the subquery at character 24 of the query, [100y:1m], makes some 52560001 samples (52560001 steps of 1m over 100y × 1 values held at each): past the query bound of 5000000 samples; a coarser step or a shorter range makes fewer"},
	} {
		if got := CheckPromQL(c.expr); got != c.want {
			t.Errorf("CheckPromQL(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
}
