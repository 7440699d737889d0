package values

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

const mi = int64(1 << 20)

func TestStepTable(t *testing.T) {
	cases := []struct {
		name           string
		t              Type
		cur, want, got int64
		pct            float64
	}{
		// Replicas: max(1, floor(30% × cur)).
		{"design example 2 → 6", Count, 2, 6, 3, 0.3},
		{"10 → 20 moves 3", Count, 10, 20, 13, 0.3},
		{"10 → 12 within", Count, 10, 12, 12, 0.3},
		{"10 → 2 moves 3 down", Count, 10, 2, 7, 0.3},
		{"0 → 5 moves 1", Count, 0, 5, 1, 0.3},
		{"3 → 1: floor(0.9)=0 → at least 1", Count, 3, 1, 2, 0.3},
		{"100 → 200 at 50%", Count, 100, 200, 150, 0.5},
		// Memory: 25% of current, rounded to 16Mi toward the current.
		{"design example 256Mi → 144Mi", Bytes, 256 * mi, 144 * mi, 192 * mi, 0.25},
		{"192Mi → 144Mi within 25%", Bytes, 192 * mi, 144 * mi, 144 * mi, 0.25},
		{"256Mi → 1Gi: +64Mi", Bytes, 256 * mi, 1024 * mi, 320 * mi, 0.25},
		// 100Mi: +25Mi = 125Mi → down to 112Mi (toward 100Mi).
		{"100Mi up, unaligned", Bytes, 100 * mi, 400 * mi, 112 * mi, 0.25},
		// 100Mi: −25Mi = 75Mi → up to 80Mi (toward 100Mi).
		{"100Mi down, unaligned", Bytes, 100 * mi, 10 * mi, 80 * mi, 0.25},
		// 64Mi: 25% is exactly 16Mi.
		{"64Mi → 128Mi: +16Mi", Bytes, 64 * mi, 128 * mi, 80 * mi, 0.25},
		// Below 64Mi no 16Mi multiple fits: the unrounded bound.
		{"20Mi → 100Mi: +5Mi", Bytes, 20 * mi, 100 * mi, 25 * mi, 0.25},
		// Millicores: 1m granule, so exactly 25%: 1000m → 1250m.
		{"1000m → 4000m", Millicores, 1000, 4000, 1250, 0.25},
		// Durations round to whole seconds toward the current: 10s +25% = 12.5s → 12s.
		{"10s → 60s", Duration, int64(10 * time.Second), int64(60 * time.Second), int64(12 * time.Second), 0.25},
	}
	for _, c := range cases {
		got := Step(Numeric(c.t, c.cur), Numeric(c.t, c.want), c.pct)
		if got != Numeric(c.t, c.got) {
			t.Errorf("%s: Step(%d, %d) = %s, want %s", c.name, c.cur, c.want, got, Numeric(c.t, c.got))
		}
	}
	// Strings and structured values are not stepped.
	if v := Step(StringOf("a"), StringOf("b"), 0.1); v != StringOf("b") {
		t.Errorf("string stepped: %s", v)
	}
}

// TestStepProperty: the bound always holds, every step makes progress
// toward the wish and never passes it.
func TestStepProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		ty := Count
		cur, want := r.Int64N(500), r.Int64N(500)
		pct := []float64{0.1, 0.25, 0.3, 0.5, 1}[r.IntN(5)]
		if i%2 == 1 {
			ty = Bytes
			cur, want = (1+r.Int64N(8192))*mi/4, (1+r.Int64N(8192))*mi/4
		}
		got := Step(Numeric(ty, cur), Numeric(ty, want), pct)
		v := got.Int()
		d, w := abs(v-cur), abs(want-cur)
		var bound float64
		if ty == Count {
			bound = max(1, float64(int64(pct*float64(cur)+1e-9)))
		} else {
			bound = pct * float64(cur)
		}
		if float64(d) > bound+1e-6 {
			t.Fatalf("%s %d → %d at %g: moved %d, bound %g", ty, cur, want, pct, d, bound)
		}
		if d > w || (want > cur) != (v > cur) && v != cur {
			t.Fatalf("%s %d → %d: step to %d overshoots or goes the wrong way", ty, cur, want, v)
		}
		if w > 0 && d == 0 {
			t.Fatalf("%s %d → %d: no progress", ty, cur, want)
		}
		if ty == Bytes && pct >= 0.25 && cur >= 64*mi && cur%(16*mi) == 0 && w >= 16*mi && d < 16*mi {
			t.Fatalf("%d → %d: a 16Mi step exists above 64Mi, moved only %d", cur, want, d)
		}
	}
}

func TestParsePrintCompare(t *testing.T) {
	cases := []struct {
		t    Type
		in   string
		want string
	}{
		{Count, "3", "3"},
		{Bytes, "256Mi", "256Mi"},
		{Bytes, "1Gi", "1Gi"},
		{Millicores, "500m", "500m"},
		{Millicores, "2", "2"},
		{Duration, "90s", "1m30s"},
		{String, "x y", "x y"},
		{Structured, `{ "b": [1, 2] }`, `{"b":[1,2]}`},
	}
	for _, c := range cases {
		v, err := Parse(c.t, c.in)
		if err != nil || v.String() != c.want || v.Type() != c.t {
			t.Errorf("Parse(%s, %q) = %s (%s), %v; want %s", c.t, c.in, v, v.Type(), err, c.want)
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var back Value
		if err := json.Unmarshal(b, &back); err != nil || back != v {
			t.Errorf("JSON round trip of %s: %s → %s, %v", v, b, back, err)
		}
	}
	for _, bad := range []struct {
		t  Type
		in string
	}{{Count, "3.5"}, {Bytes, "lots"}, {Millicores, "-"}, {Duration, "5"}, {Structured, "3"}, {Structured, "{"}} {
		if _, err := Parse(bad.t, bad.in); err == nil {
			t.Errorf("Parse(%s, %q) accepted", bad.t, bad.in)
		}
	}
	if BytesOf(100*mi).Compare(BytesOf(200*mi)) != -1 || CountOf(2).Compare(CountOf(2)) != 0 || CountOf(3).Compare(CountOf(2)) != 1 {
		t.Error("compare")
	}
	if Max(CountOf(2), CountOf(5)) != CountOf(5) || Min(CountOf(2), CountOf(5)) != CountOf(2) {
		t.Error("max/min")
	}
	if BytesOf(110*mi+1).RoundUp() != BytesOf(112*mi) || BytesOf(112*mi).RoundUp() != BytesOf(112*mi) || CountOf(7).RoundUp() != CountOf(7) {
		t.Error("round up")
	}
	// Tolerance: counts at least one, bytes a plain fraction.
	if !Within(CountOf(6), CountOf(7), 0.1) || Within(CountOf(6), CountOf(8), 0.1) {
		t.Error("count tolerance")
	}
	if Within(BytesOf(100*mi), BytesOf(111*mi), 0.1) || !Within(BytesOf(100*mi), BytesOf(110*mi), 0.1) {
		t.Error("bytes tolerance")
	}
	// Every numeric value prints as something that reads back exactly.
	r := rand.New(rand.NewPCG(5, 8))
	for i := 0; i < 100000; i++ {
		n := r.Int64N(1<<42) - 1<<41
		for _, ty := range []Type{Count, Bytes, Millicores, Duration} {
			v := Numeric(ty, n)
			if ty == Duration {
				v = Numeric(ty, n*1000) // ns below a µs print as such
			}
			back, err := Parse(ty, v.String())
			if err != nil || back != v {
				t.Fatalf("%s %d prints %q, reads back %v, %v", ty, v.Int(), v.String(), back.Int(), err)
			}
		}
	}
	if Numeric(String, 3).IsValid() {
		t.Error("a numeric value of a non-numeric type")
	}
	if _, err := StructuredOf(make([]byte, MaxStructured+1)); err == nil {
		t.Error("an oversized structured value was accepted")
	}
}

// Two writings of one JSON value are one structured value: keys sorted,
// whitespace gone, numbers as an API server holds them (1.0 is 1, 1e3 is 1000).
func TestStructuredIsCanonical(t *testing.T) {
	a, err := StructuredOf([]byte(`{ "b": 1.0, "a": [ {"y": 1e3, "x": "<>", "z": 0.5} ] }`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := StructuredOf([]byte(`{"a":[{"x":"<>","y":1000,"z":0.5}],"b":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if a != b || a.Str() != `{"a":[{"x":"<>","y":1000,"z":0.5}],"b":1}` {
		t.Fatalf("%s vs %s", a.Str(), b.Str())
	}
	for _, bad := range []string{`3`, `"s"`, `{} {}`, `{`} {
		if _, err := StructuredOf([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
