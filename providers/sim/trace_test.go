package sim

import (
	"strings"
	"testing"
	"time"
)

const arrivals = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n" +
	"2023-11-16 18:15:46.6805900,374,44\r\n" +
	"2023-11-16 18:15:46.9951690,396,109\r\n" +
	"2023-11-16 18:15:48.2224670,879,55\r\n" +
	"2023-11-16 18:15:48.3910170,91,16\r\n" +
	"2023-11-16 18:15:48.5000000,91,16\r\n" +
	"2023-11-16 18:15:49.0000000,91,16"

func TestArrivalTrace(t *testing.T) {
	tr, err := readTrace(strings.NewReader(arrivals), TraceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Start.Equal(time.Date(2023, 11, 16, 18, 15, 46, 0, time.UTC)) {
		t.Errorf("start %v", tr.Start)
	}
	want := []float64{2, 0, 3, 1}
	if len(tr.Rate) != len(want) {
		t.Fatalf("rates %v, want %v", tr.Rate, want)
	}
	for i := range want {
		if tr.Rate[i] != want[i] {
			t.Fatalf("rates %v, want %v", tr.Rate, want)
		}
	}
	if tr.Arrivals != 6 || tr.Duration() != 4*time.Second || tr.Rate[2] != 3 {
		t.Errorf("arrivals %d duration %v", tr.Arrivals, tr.Duration())
	}
	scaled, _ := readTrace(strings.NewReader(arrivals), TraceOptions{RateScale: 80})
	if scaled.Rate[2] != 240 {
		t.Errorf("rateScale: %v", scaled.Rate)
	}
	win, _ := readTrace(strings.NewReader(arrivals), TraceOptions{From: 2 * time.Second, Until: 3 * time.Second})
	if len(win.Rate) != 1 || win.Rate[0] != 3 || !win.Start.Equal(tr.Start.Add(2*time.Second)) {
		t.Errorf("window: %+v", win)
	}
}

func TestRateTrace(t *testing.T) {
	tr, err := readTrace(strings.NewReader("second,rate\n0,5\n1,7.5\n2,0\n"), TraceOptions{RateScale: 2, Thin: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Rate) != 3 || tr.Rate[0] != 5 || tr.Rate[1] != 7.5 || tr.Rate[2] != 0 {
		t.Errorf("rates %v", tr.Rate)
	}
}

func TestTraceErrors(t *testing.T) {
	for name, c := range map[string]struct {
		src  string
		o    TraceOptions
		want string
	}{
		"no header":     {"", TraceOptions{}, "header"},
		"no column":     {"a,b\n1,2\n", TraceOptions{}, "want a TIMESTAMP column"},
		"bad timestamp": {"TIMESTAMP\nyesterday\n", TraceOptions{}, `line 2: "yesterday" is not a timestamp`},
		"out of order":  {"TIMESTAMP\n2023-01-01 00:00:05\n2023-01-01 00:00:01\n", TraceOptions{}, "line 3: arrivals must be in time order"},
		"negative rate": {"rate\n-1\n", TraceOptions{}, "line 2: rate"},
		"empty":         {"rate\n", TraceOptions{}, "no rows"},
		"empty window":  {"rate\n1\n2\n", TraceOptions{From: 5 * time.Second}, "window"},
		"bad thin":      {"rate\n1\n", TraceOptions{Thin: 2}, "thin"},
		"short record":  {"TIMESTAMP,x\n2023-01-01 00:00:05,1\n\"unterminated\n", TraceOptions{}, "line 3"},
	} {
		_, err := readTrace(strings.NewReader(c.src), c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", name, err, c.want)
		}
	}
	if _, err := LoadTrace("/nonexistent/trace.csv", TraceOptions{}); err == nil || !strings.Contains(err.Error(), "opening trace") {
		t.Errorf("missing file: %v", err)
	}
}
