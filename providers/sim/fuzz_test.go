package sim

import (
	"bytes"

	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// Bounds the fuzz targets read traces with: small, so that a bound that
// does not hold shows at once, and so each input is cheap.
const (
	fuzzMaxDuration = time.Hour
	fuzzMaxRows     = 5000
	fuzzMaxLine     = 512
)

// FuzzReadTrace: any input is a trace or an error, never a panic; a trace
// is within the bounds asked for, its rates finite and non-negative; an
// error is one short line; reading is deterministic; and a trace written
// back out as a rate trace reads back as itself.
func FuzzReadTrace(f *testing.F) {
	f.Add([]byte(arrivals), 1.0, 1.0, uint16(0), uint16(0))
	f.Add([]byte(arrivals), 80.0, 0.5, uint16(1), uint16(3))
	f.Add([]byte("second,rate\n2023-11-16T18:00:00Z,5\n1,7.5\n2,0\n"), 2.0, 0.5, uint16(0), uint16(0))
	f.Add([]byte("rate\n1e308\n"), 1e6, 1.0, uint16(0), uint16(0))
	f.Add([]byte("TIMESTAMP\n1923-11-16 18:15:46\n2023-11-16 18:15:46\n"), 1.0, 1.0, uint16(0), uint16(0))
	f.Add([]byte("\ufeffTimestamp,x\n2023-11-16T18:00:00.5Z,\"a\nb\"\n"), 1.0, 1.0, uint16(0), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, scale, thin float64, from, until uint16) {
		o := TraceOptions{RateScale: scale, Thin: thin, From: time.Duration(from) * time.Second, Until: time.Duration(until) * time.Second,
			MaxDuration: fuzzMaxDuration, MaxRows: fuzzMaxRows, MaxLineBytes: fuzzMaxLine}
		tr, err := readTrace(bytes.NewReader(data), o)
		if err != nil {
			if msg := err.Error(); len(msg) > 400 || strings.Contains(msg, "\n") || !utf8.ValidString(msg) {
				t.Fatalf("error is not one short line: %q", msg)
			}
			if tr != nil {
				t.Fatal("an error with a trace")
			}
			return
		}
		if len(tr.Rate) == 0 || tr.Duration() > fuzzMaxDuration || tr.Arrivals < 1 || tr.Arrivals > fuzzMaxRows || tr.Start.IsZero() {
			t.Fatalf("out of bounds: %d rates, %d arrivals, start %v", len(tr.Rate), tr.Arrivals, tr.Start)
		}
		for i, r := range tr.Rate {
			if r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
				t.Fatalf("rate %d is %v", i, r)
			}
		}
		again, err := readTrace(bytes.NewReader(data), o)
		if err != nil || !again.Start.Equal(tr.Start) || again.Arrivals != tr.Arrivals || !equalRates(again.Rate, tr.Rate) {
			t.Fatalf("a second read differs: %v", err)
		}
		// The rates as a rate trace, timestamped at the start, read back
		// unscaled and unthinned, are the same trace.
		var b strings.Builder
		b.WriteString("second,rate\n")
		for i, r := range tr.Rate {
			if i == 0 {
				b.WriteString(tr.Start.UTC().Format(time.RFC3339Nano))
			} else {
				b.WriteString(strconv.Itoa(i))
			}
			b.WriteString("," + strconv.FormatFloat(r, 'g', -1, 64) + "\n")
		}
		back, err := readTrace(strings.NewReader(b.String()), TraceOptions{MaxDuration: fuzzMaxDuration, MaxRows: fuzzMaxRows, MaxLineBytes: fuzzMaxLine})
		if err != nil {
			t.Fatalf("the trace written back does not read: %v\n%s", err, b.String())
		}
		if !back.Start.Equal(tr.Start) || !equalRates(back.Rate, tr.Rate) {
			t.Fatalf("round trip: start %v → %v, rates %v → %v", tr.Start, back.Start, tr.Rate, back.Rate)
		}
	})
}

func equalRates(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// FuzzLoadChanges: any content of a sim state file is changes or an error
// naming the file, never a panic; changes it accepts pass every check, in
// time order; and what is written reads back as the same changes and is
// written the same again. Random bytes rarely carry a right checksum, so
// whatever decodes is also resealed and must then load.
func FuzzLoadChanges(f *testing.F) {
	good := `{"at":5,"address":"sim:Deployment/shop/api","action":"update","attributes":{"spec.replicas":{"type":"count","value":"3"}},"changed":["spec.replicas"],"manager":"setpoint"}`
	for _, cs := range []string{
		`[]`,
		`[` + good + `]`,
		`[` + good + `,` + strings.Replace(good, `"at":5`, `"at":4`, 1) + `]`,
		`[{"at":1,"address":"sim:HorizontalPodAutoscaler/shop/api","action":"delete","manager":"setpoint"}]`,
		`[{"at":0,"address":"sim:KnativeService/default/fib","action":"create","attributes":{"spec.template.metadata.annotations[\"autoscaling.knative.dev/min-scale\"]":{"type":"count","value":"2"},"spec.template.spec.containers[name=app].resources.limits.memory":{"type":"bytes","value":"512Mi"}},"manager":"setpoint","force":true}]`,
	} {
		f.Add([]byte(`{"version":3,"checksum":"00","changes":` + cs + `}`))
	}
	f.Add([]byte(`{"version":2,"changes":[]}`))
	f.Add([]byte(`{"version":3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		const path = "fuzz/sim-state.json"
		changes, err := parseChanges(path, data)
		if err != nil {
			if !strings.Contains(err.Error(), path) || len(err.Error()) > 700 {
				t.Fatalf("the error does not name the file, or is long: %q", err)
			}
		} else {
			roundTrip(t, changes)
		}
		decoded, _, err := decodeState(path, data)
		if err == nil {
			b, err := encodeChanges(decoded)
			if err != nil {
				t.Fatal(err)
			}
			resealed, err := parseChanges(path, b)
			if err != nil {
				t.Fatalf("changes that decoded, resealed, do not load: %v\n%s", err, b)
			}
			if !changesEqual(resealed, nonNil(decoded)) {
				t.Fatalf("resealed changes differ:\n%+v\n%+v", decoded, resealed)
			}
			roundTrip(t, resealed)
		}
	})
}

func nonNil(cs []Change) []Change {
	if len(cs) == 0 {
		return nil
	}
	return cs
}

// roundTrip checks loaded changes and that they are written and read back
// the same.
func roundTrip(t *testing.T, changes []Change) {
	t.Helper()
	for i, c := range changes {
		if err := c.check(); err != nil {
			t.Fatalf("change %d passed the loader but not its check: %v", i+1, err)
		}
		if i > 0 && c.At < changes[i-1].At {
			t.Fatalf("change %d goes back in time", i+1)
		}
	}
	b, err := encodeChanges(changes)
	if err != nil {
		t.Fatal(err)
	}
	back, err := parseChanges("again", b)
	if err != nil {
		t.Fatalf("what was written does not load: %v\n%s", err, b)
	}
	if !changesEqual(back, changes) {
		t.Fatalf("round trip:\n%+v\n%+v", changes, back)
	}
	b2, err := encodeChanges(back)
	if err != nil || !bytes.Equal(b, b2) {
		t.Fatalf("written twice, differently: %v\n%s\n%s", err, b, b2)
	}
}
