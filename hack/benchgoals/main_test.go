package main

import "testing"

func TestMetric(t *testing.T) {
	out := `goos: linux
BenchmarkPublish-2   	     200	   4311645 ns/op	       117.2 flip-µs	         4.311 publish-ms	        19.26 quiesce-ms
BenchmarkPublish-2   	     200	    559829 ns/op	         2.121 flip-µs	         0.5594 publish-ms	        10.89 quiesce-ms
PASS
ok  	github.com/setpoint-dev/setpoint/bpf/dataplane	26.187s
`
	for _, c := range []struct {
		unit string
		want float64
		ok   bool
	}{{"publish-ms", 0.5594, true}, {"flip-µs", 2.121, true}, {"ns/op", 559829, true}, {"heap-MB", 0, false}} {
		if v, ok := metric(out, c.unit); v != c.want || ok != c.ok {
			t.Errorf("%s: %v, %v; want %v, %v (the last line's)", c.unit, v, ok, c.want, c.ok)
		}
	}
	if v, ok := metric("Benchmark not a line\nBenchmarkX 12 abc ns/op\n", "ns/op"); ok {
		t.Errorf("a value that is no number read as %v", v)
	}
}

func TestVerdict(t *testing.T) {
	g := goal{max: 5}
	if verdict(g, 5) != "met" || verdict(g, 5.01) != "missed" {
		t.Error("at most 5: 5 meets it, 5.01 does not")
	}
	if g := (goal{min: 10}); verdict(g, 10) != "met" || verdict(g, 9.9) != "missed" {
		t.Error("at least 10: 10 meets it, 9.9 does not")
	}
}

func TestShort(t *testing.T) {
	for v, want := range map[float64]string{1126.4: "1126", 8.743: "8.74", 0.5594: "0.559", 13.81: "13.8"} {
		if got := short(v); got != want {
			t.Errorf("short(%v) = %q, want %q", v, got, want)
		}
	}
}
