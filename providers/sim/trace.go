package sim

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/internal/confine"
)

// Trace is a request trace on virtual time, from Start: the arrivals of
// an arrival trace (each with its time and, when the file has token
// counts, its cost), or the rates of a rate trace. The transformations
// rateScale and thin are not applied to the arrivals here: the world
// applies them as it replays (see source), so a scaled trace can be K
// independent copies rather than K clones.
type Trace struct {
	Start time.Time
	// Rate[i] is the expected number of requests arriving in second i
	// after the explicit transformations (rateScale, thin, window): the
	// rows of a rate trace, or the arrivals counted in that second, times
	// thin × rateScale.
	Rate []float64
	// Arrivals counts the rows read, for attribution.
	Arrivals int

	// Arrival traces only (first is nil for a rate trace): first[s] is the
	// index of second s's first arrival (len(Rate)+1 entries), offset[i]
	// how far into its second arrival i came, and tokens[i] its cost proxy
	// (ContextTokens + GeneratedTokens; nil when the file has neither).
	first  []int32
	offset []float32
	tokens []float32
	// meanTokens is the mean of tokens over the whole file, so a window
	// keeps the cost scale of the trace it cuts.
	meanTokens float64
	// row0 is the row (from 0) of the first arrival kept by the window:
	// per-arrival draws are keyed by row, so a window replays the same
	// draws for the arrivals it keeps.
	row0 int
	// thin and scale are the options the rates were multiplied by.
	thin, scale float64
}

// HasTokens reports whether the trace gives each arrival a cost.
func (t *Trace) HasTokens() bool { return t.tokens != nil }

// Peak is the largest count of arrivals (or rate) in one second, before
// rateScale and thin.
func (t *Trace) Peak() float64 {
	var m float64
	if t.first != nil {
		for s := 0; s+1 < len(t.first); s++ {
			m = max(m, float64(t.first[s+1]-t.first[s]))
		}
		return m
	}
	for _, r := range t.Rate {
		m = max(m, r)
	}
	return m / t.factor()
}

// factor is what the trace's rates were multiplied by (thin × rateScale).
func (t *Trace) factor() float64 {
	f := t.thin * t.scale
	if f == 0 {
		return 1
	}
	return f
}

// Duration is the trace's length.
func (t *Trace) Duration() time.Duration { return time.Duration(len(t.Rate)) * time.Second }

// TraceOptions are the explicit transformations of a trace; none is applied
// unless asked for. The Max fields bound what reading a trace may cost, so
// a small file cannot make a large world; zero means the default.
type TraceOptions struct {
	RateScale float64 // multiply the rate, in (0, MaxRateScale] (0 means 1)
	Thin      float64 // keep each arrival with this probability (0 means 1)
	From      time.Duration
	Until     time.Duration // 0: to the end

	// MaxDuration bounds the time from a trace's first row to its last
	// (DefaultMaxTraceDuration): the trace becomes one rate a second, so
	// two arrivals a century apart would be 25 GB of rates.
	MaxDuration time.Duration
	// MaxRows bounds the data rows read (DefaultMaxTraceRows).
	MaxRows int
	// MaxLineBytes bounds one line of the file (DefaultMaxTraceLine), so a
	// file without line breaks is not read whole into one record.
	MaxLineBytes int
}

// Bounds of a trace, and of the rate scale (the schema's).
const (
	// DefaultMaxTraceDuration is a month of rates: 21 MB of float64 (each
	// process holding the trace keeps one copy).
	DefaultMaxTraceDuration = 31 * 24 * time.Hour
	// DefaultMaxTraceRows is twice the rows of the largest public
	// serverless arrival traces we know of (a week of Azure's LLM trace).
	// Each arrival kept costs 8 bytes (its offset and its cost): 160 MB at
	// the bound.
	DefaultMaxTraceRows = 20_000_000
	// DefaultMaxTraceLine is far more than a timestamp and a few columns.
	DefaultMaxTraceLine = 64 << 10
	// MaxRateScale is the schema's upper bound on rateScale.
	MaxRateScale = 1e6
)

// Timestamp layouts of arrival traces: the Azure trace's 100 ns precision
// and RFC 3339.
var layouts = []string{"2006-01-02 15:04:05.9999999", "2006-01-02 15:04:05", time.RFC3339Nano}

// LoadTrace reads a CSV of arrival timestamps (a TIMESTAMP or time column
// of dates) or of per-second rates (a rate column, one row per second).
// Only a regular file is read: a device or a FIFO never ends.
func LoadTrace(path string, o TraceOptions) (*Trace, error) {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("opening trace: %s is not a regular file (%s)", path, confine.Kind(fi.Mode()))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening trace: %w", err)
	}
	defer f.Close()
	// Checked again on what was opened: the path may have changed since.
	if fi, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("opening trace: %w", err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("opening trace: %s is not a regular file (%s)", path, confine.Kind(fi.Mode()))
	}
	t, err := readTrace(f, o)
	if err != nil {
		return nil, fmt.Errorf("reading trace %s: %w", path, err)
	}
	return t, nil
}

// inRange reports whether lo < v ≤ hi; NaN is in no range.
func inRange(v, lo, hi float64) bool { return v > lo && v <= hi }

func readTrace(r io.Reader, o TraceOptions) (*Trace, error) {
	if o.RateScale == 0 {
		o.RateScale = 1
	}
	if o.Thin == 0 {
		o.Thin = 1
	}
	if !inRange(o.RateScale, 0, MaxRateScale) {
		return nil, fmt.Errorf("rateScale must be in (0, 1e6], got %v", o.RateScale)
	}
	if !inRange(o.Thin, 0, 1) {
		return nil, fmt.Errorf("thin must be in (0, 1], got %v", o.Thin)
	}
	if o.MaxDuration <= 0 {
		o.MaxDuration = DefaultMaxTraceDuration
	}
	if o.MaxRows <= 0 {
		o.MaxRows = DefaultMaxTraceRows
	}
	if o.MaxLineBytes <= 0 {
		o.MaxLineBytes = DefaultMaxTraceLine
	}
	// The last second a trace may have a rate for.
	maxSec := int(o.MaxDuration / time.Second)
	lines := &lineLimit{r: r, max: o.MaxLineBytes, line: 1}
	cr := csv.NewReader(bufio.NewReader(lines))
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("header: %w", unwrapLine(err))
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
	t := &Trace{thin: o.Thin, scale: o.RateScale}
	rows := 0
	row := func(line int) error {
		if rows++; rows > o.MaxRows {
			return fmt.Errorf("line %d: more than %d rows: a trace may have at most %d (TraceOptions.MaxRows)", line, o.MaxRows, o.MaxRows)
		}
		return nil
	}
	if rc := col("rate", "rps", "requests"); rc >= 0 {
		tc := col("second", "time", "timestamp")
		err := eachRecord(cr, rc, func(line int, rec []string) error {
			if err := row(line); err != nil {
				return err
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[rc]), 64)
			if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
				return fmt.Errorf("line %d: rate %s is not a non-negative number", line, quote(rec[rc]))
			}
			if math.IsInf(v*o.RateScale, 0) {
				return fmt.Errorf("line %d: rate %v × rateScale %v is not finite", line, v, o.RateScale)
			}
			if len(t.Rate) >= maxSec {
				return fmt.Errorf("line %d: a rate trace has one row a second and may span at most %s (TraceOptions.MaxDuration)", line, span(o.MaxDuration))
			}
			if tc >= 0 && tc < len(rec) && line == 2 {
				if ts, ok := parseTime(rec[tc]); ok {
					t.Start = ts
				}
			}
			t.Arrivals++
			t.Rate = append(t.Rate, v)
			return nil
		})
		if err != nil {
			return nil, err
		}
	} else {
		tc := col("timestamp", "time", "arrival")
		if tc < 0 {
			return nil, fmt.Errorf("header: want a TIMESTAMP column of arrivals or a rate column, got %d columns", len(head))
		}
		var first time.Time
		var last time.Duration
		ctxCol, genCol := col("contexttokens"), col("generatedtokens")
		withTokens := ctxCol >= 0 || genCol >= 0
		var sumTokens float64
		tokenAt := func(line int, rec []string, c int) (float64, error) {
			if c < 0 {
				return 0, nil
			}
			if c >= len(rec) {
				return 0, fmt.Errorf("line %d: only %d columns", line, len(rec))
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[c]), 64)
			if err != nil || !(v >= 0) || v > 1e12 {
				return 0, fmt.Errorf("line %d: token count %s is not a number in [0, 1e12]", line, quote(rec[c]))
			}
			return v, nil
		}
		err := eachRecord(cr, tc, func(line int, rec []string) error {
			if err := row(line); err != nil {
				return err
			}
			ts, ok := parseTime(rec[tc])
			if !ok {
				return fmt.Errorf("line %d: %s is not a timestamp (want e.g. 2023-11-16 18:15:46.6805900)", line, quote(rec[tc]))
			}
			if first.IsZero() {
				first = ts.Truncate(time.Second)
				t.Start = first
			}
			if ts.Before(first) || len(t.offset) > 0 && ts.Sub(first) < last {
				return fmt.Errorf("line %d: arrivals must be in time order", line)
			}
			// Checked before the rates grow to it: the bound is what keeps a
			// two-row file from asking for years of rates.
			since := ts.Sub(first)
			if since >= time.Duration(maxSec)*time.Second {
				return fmt.Errorf("line %d: arrival %s after the first: a trace may span at most %s (TraceOptions.MaxDuration)", line, since, span(o.MaxDuration))
			}
			last = since
			if withTokens {
				c, err := tokenAt(line, rec, ctxCol)
				if err != nil {
					return err
				}
				g, err := tokenAt(line, rec, genCol)
				if err != nil {
					return err
				}
				t.tokens = append(t.tokens, float32(c+g))
				sumTokens += c + g
			}
			t.Arrivals++
			i := int(since / time.Second)
			if i >= len(t.Rate) {
				t.Rate = slices.Grow(t.Rate, i+1-len(t.Rate))[:i+1]
			}
			t.Rate[i]++
			t.offset = append(t.offset, float32((since % time.Second).Seconds()))
			return nil
		})
		if err != nil {
			return nil, err
		}
		if withTokens {
			t.meanTokens = sumTokens / float64(len(t.tokens))
			if !(t.meanTokens > 0) {
				// No arrival has a cost: they cannot be scaled to a mean.
				t.tokens = nil
			}
		}
		if len(t.Rate) > 0 {
			t.first = make([]int32, len(t.Rate)+1)
			for s, n := range t.Rate {
				t.first[s+1] = t.first[s] + int32(n)
			}
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
		t.Rate[i] *= o.RateScale * o.Thin
		if math.IsInf(t.Rate[i], 0) {
			// Arrivals are counted one by one, so only a scale can make
			// them infinite; say where.
			return nil, fmt.Errorf("second %d: %v arrivals × rateScale %v is not finite", i, t.Rate[i]/(o.RateScale*o.Thin), o.RateScale)
		}
	}
	return window(t, o)
}

// span prints a bound in days when it is a whole number of them.
func span(d time.Duration) string {
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return d.String()
}

// quote prints a field of the trace for a message, cut short: an error
// should say which value is wrong, not carry a line of the file.
func quote(s string) string {
	const most = 40
	if len(s) <= most {
		return strconv.Quote(s)
	}
	return strconv.Quote(strings.TrimSuffix(diag.Cut(s, most), "…")) + "…"
}

// errLineTooLong is what lineLimit returns when a line exceeds its bound.
type errLineTooLong struct{ line, max int }

func (e *errLineTooLong) Error() string {
	return fmt.Sprintf("line %d: longer than %d bytes (TraceOptions.MaxLineBytes)", e.line, e.max)
}

// lineLimit passes r through until a line (bytes between newlines) is
// longer than max. The CSV reader buffers a whole record, so this is what
// bounds its memory on a file without line breaks.
type lineLimit struct {
	r    io.Reader
	max  int
	cur  int // bytes of the current line so far
	line int // the current line, from 1
	err  error
}

func (l *lineLimit) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.r.Read(p)
	for i, b := range p[:n] {
		if b == '\n' {
			l.cur = 0
			l.line++
			continue
		}
		if l.cur++; l.cur > l.max {
			l.err = &errLineTooLong{line: l.line, max: l.max}
			// Hand over the bytes before the long line's end, then the
			// error: the reader sees the lines before it whole.
			return i, nil
		}
	}
	return n, err
}

// unwrapLine finds a line-length error under the CSV reader's wrapping,
// so the message names the bound rather than a parse error.
func unwrapLine(err error) error {
	var long *errLineTooLong
	if errors.As(err, &long) {
		return long
	}
	return err
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
			if long := unwrapLine(err); long != err {
				return long
			}
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
	if t.first != nil {
		lo, hi := t.first[from], t.first[until]
		t.row0 = int(lo)
		t.offset = t.offset[lo:hi]
		if t.tokens != nil {
			t.tokens = t.tokens[lo:hi]
		}
		first := make([]int32, until-from+1)
		for i := range first {
			first[i] = t.first[from+i] - lo
		}
		t.first = first
	}
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
