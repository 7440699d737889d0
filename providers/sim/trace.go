package sim

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"
)

// Trace is a request rate per second of virtual time, from Start.
type Trace struct {
	Start time.Time
	// Rate[i] is the number of requests arriving in second i (after the
	// explicit transformations: rateScale, thin, window).
	Rate []float64
	// Arrivals counts the rows read (before thinning), for attribution.
	Arrivals int
}

// Duration is the trace's length.
func (t *Trace) Duration() time.Duration { return time.Duration(len(t.Rate)) * time.Second }

// At returns the rate in the second containing offset d (0 outside).
func (t *Trace) At(d time.Duration) float64 {
	i := int(d / time.Second)
	if i < 0 || i >= len(t.Rate) {
		return 0
	}
	return t.Rate[i]
}

// TraceOptions are the explicit transformations of a trace; none is applied
// unless asked for.
type TraceOptions struct {
	RateScale float64 // multiply the rate (0 means 1)
	Thin      float64 // keep each arrival with this probability (0 means 1)
	From      time.Duration
	Until     time.Duration // 0: to the end
	Seed      uint64
}

// Timestamp layouts of arrival traces: the Azure trace's 100 ns precision
// and RFC 3339.
var layouts = []string{"2006-01-02 15:04:05.9999999", "2006-01-02 15:04:05", time.RFC3339Nano}

// LoadTrace reads a CSV of arrival timestamps (a TIMESTAMP or time column
// of dates) or of per-second rates (a rate column, one row per second).
func LoadTrace(path string, o TraceOptions) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening trace: %w", err)
	}
	defer f.Close()
	t, err := readTrace(bufio.NewReader(f), o)
	if err != nil {
		return nil, fmt.Errorf("reading trace %s: %w", path, err)
	}
	return t, nil
}

func readTrace(r io.Reader, o TraceOptions) (*Trace, error) {
	if o.RateScale == 0 {
		o.RateScale = 1
	}
	if o.Thin == 0 {
		o.Thin = 1
	}
	if o.RateScale < 0 || o.Thin < 0 || o.Thin > 1 {
		return nil, fmt.Errorf("rateScale must be > 0 and thin in (0, 1]")
	}
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	col := func(names ...string) int {
		for i, h := range head {
			h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
			for _, n := range names {
				if h == n {
					return i
				}
			}
		}
		return -1
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x5e7901))
	t := &Trace{}
	if rc := col("rate", "rps", "requests"); rc >= 0 {
		tc := col("second", "time", "timestamp")
		err := eachRecord(cr, rc, func(line int, rec []string) error {
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[rc]), 64)
			if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
				return fmt.Errorf("line %d: rate %q is not a non-negative number", line, rec[rc])
			}
			if tc >= 0 && tc < len(rec) && line == 2 {
				if ts, ok := parseTime(rec[tc]); ok {
					t.Start = ts
				}
			}
			t.Arrivals++
			t.Rate = append(t.Rate, v*o.Thin)
			return nil
		})
		if err != nil {
			return nil, err
		}
	} else {
		tc := col("timestamp", "time", "arrival")
		if tc < 0 {
			return nil, fmt.Errorf("header %v: want a TIMESTAMP column of arrivals or a rate column", head)
		}
		var first time.Time
		err := eachRecord(cr, tc, func(line int, rec []string) error {
			ts, ok := parseTime(rec[tc])
			if !ok {
				return fmt.Errorf("line %d: %q is not a timestamp (want e.g. 2023-11-16 18:15:46.6805900)", line, rec[tc])
			}
			if first.IsZero() {
				first = ts.Truncate(time.Second)
				t.Start = first
			}
			if ts.Before(first) {
				return fmt.Errorf("line %d: arrivals must be in time order", line)
			}
			t.Arrivals++
			// Thinning draws for every arrival, kept or not, so the same seed
			// keeps the same arrivals whatever the window.
			if o.Thin < 1 && rng.Float64() >= o.Thin {
				return nil
			}
			i := int(ts.Sub(first) / time.Second)
			for len(t.Rate) <= i {
				t.Rate = append(t.Rate, 0)
			}
			t.Rate[i]++
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if len(t.Rate) == 0 {
		return nil, fmt.Errorf("no rows")
	}
	if t.Start.IsZero() {
		// A rate trace without timestamps starts at the Unix epoch: year 1
		// is outside what millisecond sample timestamps can hold.
		t.Start = time.Unix(0, 0).UTC()
	}
	for i := range t.Rate {
		t.Rate[i] *= o.RateScale
	}
	return window(t, o)
}

// eachRecord calls f with every data row (1-based line numbers, the header
// being line 1) that has a column col.
func eachRecord(cr *csv.Reader, col int, f func(line int, rec []string) error) error {
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
		if col >= len(rec) {
			return fmt.Errorf("line %d: only %d columns", line, len(rec))
		}
		if err := f(line, rec); err != nil {
			return err
		}
	}
}

func window(t *Trace, o TraceOptions) (*Trace, error) {
	from := int(o.From / time.Second)
	until := len(t.Rate)
	if o.Until > 0 {
		until = min(until, int(o.Until/time.Second))
	}
	if from < 0 || from >= until {
		return nil, fmt.Errorf("window [%s, %s) is empty for a trace of %s", o.From, o.Until, t.Duration())
	}
	t.Rate = t.Rate[from:until]
	t.Start = t.Start.Add(time.Duration(from) * time.Second)
	return t, nil
}

func parseTime(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	for _, l := range layouts {
		if ts, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			return ts, true
		}
	}
	return time.Time{}, false
}
