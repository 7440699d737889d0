package spec

import (
	"encoding/json"
	"testing"
	"time"
)

func TestParseBytes(t *testing.T) {
	cases := []struct {
		in   string
		want Bytes
		err  bool
	}{
		{"0", 0, false},
		{"1024", 1024, false},
		{"256Mi", 256 << 20, false},
		{"1.5Gi", 3 << 29, false},
		{"1Ki", 1024, false},
		{"2Ti", 2 << 40, false},
		{"1k", 1000, false},
		{"1M", 1_000_000, false},
		{"1G", 1_000_000_000, false},
		{"0.5", 1, false}, // a fraction of a byte rounds up
		{"", 0, true},
		{"Mi", 0, true},
		{"-1Mi", 0, true},
		{"1e3", 0, true},
		{"12MB", 0, true},
		{"lots", 0, true},
		{"9999999999Ti", 0, true},
	}
	for _, c := range cases {
		got, err := ParseBytes(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d, error %v", c.in, got, err, c.want, c.err)
		}
	}
}

func TestBytesString(t *testing.T) {
	cases := map[Bytes]string{
		0:                "0",
		64 * MiB:         "64Mi",
		144 * MiB:        "144Mi",
		4 * GiB:          "4Gi",
		1536 * MiB:       "1536Mi",
		1000:             "1000",
		110*MiB + 1:      "110.0Mi",
		3 * KiB:          "3Ki",
		TiB:              "1Ti",
		20*MiB + 512*KiB: "20992Ki",
	}
	for in, want := range cases {
		if got := in.String(); got != want {
			t.Errorf("Bytes(%d).String() = %q, want %q", int64(in), got, want)
		}
	}
}

func TestParseMilliCPU(t *testing.T) {
	cases := []struct {
		in   string
		want MilliCPU
		err  bool
	}{
		{"500m", 500, false},
		{"2", 2000, false},
		{"0.5", 500, false},
		{"1.25", 1250, false},
		{"0m", 0, true},
		{"0", 0, true},
		{"m", 0, true},
		{"-1", 0, true},
		{"1.5m", 0, true},
		{"NaN", 0, true},
	}
	for _, c := range cases {
		got, err := ParseMilliCPU(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseMilliCPU(%q) = %d, %v; want %d, error %v", c.in, got, err, c.want, c.err)
		}
	}
	if s := MilliCPU(1500).String(); s != "1500m" {
		t.Errorf("1500m prints %q", s)
	}
	if s := MilliCPU(2000).String(); s != "2" {
		t.Errorf("2000m prints %q", s)
	}
}

func TestParsePercent(t *testing.T) {
	cases := []struct {
		in   string
		want Percent
		err  bool
	}{
		{"10%", 0.1, false},
		{"0%", 0, false},
		{"100%", 1, false},
		{"12.5%", 0.125, false},
		{"10", 0, true},
		{"101%", 0, true},
		{"-1%", 0, true},
		{"%", 0, true},
	}
	for _, c := range cases {
		got, err := ParsePercent(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParsePercent(%q) = %v, %v; want %v, error %v", c.in, got, err, c.want, c.err)
		}
	}
}

// TestJSONRoundTrip checks that every scalar prints what it reads, so saved
// plans and state files decode to the same values.
func TestJSONRoundTrip(t *testing.T) {
	type all struct {
		B Bytes
		C MilliCPU
		D Duration
		P Percent
	}
	in := all{B: 144 * MiB, C: 750, D: Duration(90 * time.Second), P: 0.25}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"B":"144Mi","C":"750m","D":"1m30s","P":"25%"}` {
		t.Fatalf("marshal: %s", b)
	}
	var out all
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out != in {
		t.Fatalf("round trip: %+v != %+v", out, in)
	}
	for _, bad := range []string{`{"B":true}`, `{"B":-5}`, `{"C":"x"}`, `{"D":"-1s"}`, `{"D":5}`, `{"P":"200%"}`, `{"P":0.1}`} {
		if err := json.Unmarshal([]byte(bad), &out); err == nil {
			t.Errorf("%s: want an error", bad)
		}
	}
}

func TestSourcePosOf(t *testing.T) {
	s := NewSource(Pos{File: "a.yaml", Line: 2, Col: 1}, []FieldPos{
		{"spec", 4, 1},
		{"spec.memory", 5, 3},
	})
	for path, want := range map[string]string{
		"spec.memory":           "a.yaml:5:3",
		"spec.memory.max":       "a.yaml:5:3",
		"spec.target.name":      "a.yaml:4:1",
		"metadata.name":         "a.yaml:2:1",
		"":                      "a.yaml:2:1",
		"spec.memory.max.extra": "a.yaml:5:3",
	} {
		if got := s.PosOf(path).String(); got != want {
			t.Errorf("PosOf(%q) = %s, want %s", path, got, want)
		}
	}
}
