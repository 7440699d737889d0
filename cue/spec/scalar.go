package spec

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Bytes is a memory quantity. It reads an integer or a Kubernetes quantity
// string ("256Mi", "1G") and prints the shortest exact binary form.
type Bytes int64

// Binary units used for parsing and printing.
const (
	KiB Bytes = 1 << 10
	MiB Bytes = 1 << 20
	GiB Bytes = 1 << 30
	TiB Bytes = 1 << 40
)

var byteSuffixes = []struct {
	s string
	m float64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
}

// ParseBytes parses "256Mi", "1.5Gi", "1G" or "1024".
func ParseBytes(s string) (Bytes, error) {
	num, mult := s, 1.0
	for _, suf := range byteSuffixes {
		if strings.HasSuffix(s, suf.s) {
			num, mult = strings.TrimSuffix(s, suf.s), suf.m
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || num == "" || strings.ContainsAny(num, "eE+-") {
		return 0, fmt.Errorf("invalid quantity %q (expected a number with an optional suffix Ki, Mi, Gi, Ti, k, M, G, T)", s)
	}
	v := f * mult
	if v > maxBytes {
		return 0, fmt.Errorf("quantity %q is too large (expected at most %s)", s, Bytes(maxBytes))
	}
	return Bytes(math.Ceil(v)), nil
}

// maxBytes bounds a quantity well inside int64, so sums and factors of a
// few quantities cannot overflow: 4194304Ti.
const maxBytes = 1 << 62

func (b Bytes) String() string {
	if b == 0 {
		return "0"
	}
	for _, u := range []struct {
		s string
		m Bytes
	}{{"Ti", TiB}, {"Gi", GiB}, {"Mi", MiB}, {"Ki", KiB}} {
		if b%u.m == 0 {
			return strconv.FormatInt(int64(b/u.m), 10) + u.s
		}
	}
	if b > 10*MiB {
		return strconv.FormatFloat(float64(b)/float64(MiB), 'f', 1, 64) + "Mi"
	}
	return strconv.FormatInt(int64(b), 10)
}

// UnmarshalJSON accepts a JSON number or quantity string.
func (b *Bytes) UnmarshalJSON(data []byte) error {
	var n json.Number
	if err := json.Unmarshal(data, &n); err == nil {
		f, err := n.Float64()
		if err != nil || f < 0 {
			return fmt.Errorf("invalid quantity %s", data)
		}
		if f > maxBytes {
			// Converting it would wrap around to a negative size.
			return fmt.Errorf("quantity %s is too large (expected at most %s)", data, Bytes(maxBytes))
		}
		*b = Bytes(math.Ceil(f))
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("invalid quantity %s", data)
	}
	v, err := ParseBytes(s)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// MarshalJSON prints the quantity string, so plans and state read well.
func (b Bytes) MarshalJSON() ([]byte, error) { return json.Marshal(b.String()) }

// MilliCPU is a CPU quantity in thousandths of a core.
type MilliCPU int64

// ParseMilliCPU parses "500m", "2" or "0.5".
func ParseMilliCPU(s string) (MilliCPU, error) {
	if m, ok := strings.CutSuffix(s, "m"); ok {
		v, err := strconv.ParseInt(m, 10, 64)
		if err != nil || v <= 0 {
			return 0, fmt.Errorf("invalid CPU quantity %q (expected e.g. 500m or 0.5)", s)
		}
		return MilliCPU(v), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("invalid CPU quantity %q (expected e.g. 500m or 0.5)", s)
	}
	m := math.Round(f * 1000)
	if m < 1 {
		// It would round to no CPU at all, which nothing can divide by.
		return 0, fmt.Errorf("CPU quantity %q is less than 1m (expected at least 1m)", s)
	}
	if m > math.MaxInt64/2 {
		return 0, fmt.Errorf("CPU quantity %q is too large", s)
	}
	return MilliCPU(m), nil
}

func (c MilliCPU) String() string {
	if c%1000 == 0 {
		return strconv.FormatInt(int64(c/1000), 10)
	}
	return strconv.FormatInt(int64(c), 10) + "m"
}

// UnmarshalJSON accepts a number of cores or a quantity string.
func (c *MilliCPU) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		s = string(data)
	}
	v, err := ParseMilliCPU(s)
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// MarshalJSON prints the quantity string.
func (c MilliCPU) MarshalJSON() ([]byte, error) { return json.Marshal(c.String()) }

// Duration is a time.Duration that reads and prints Go duration strings.
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalJSON accepts "90s", "5m", "1h30m" or "0".
func (d *Duration) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("invalid duration %s (expected a string like \"90s\")", data)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("invalid duration %q (expected e.g. 90s, 5m, 1h30m)", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON prints the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// Percent is a percentage kept as a fraction: "10%" is 0.1.
type Percent float64

// ParsePercent parses "10%" or "12.5%".
func ParsePercent(s string) (Percent, error) {
	num, ok := strings.CutSuffix(s, "%")
	f, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || f < 0 || f > 100 {
		return 0, fmt.Errorf("invalid percentage %q (expected 0%% to 100%%, e.g. 10%%)", s)
	}
	return Percent(f / 100), nil
}

func (p Percent) String() string {
	return strconv.FormatFloat(float64(p)*100, 'f', -1, 64) + "%"
}

// UnmarshalJSON accepts "10%".
func (p *Percent) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("invalid percentage %s (expected a string like \"10%%\")", data)
	}
	v, err := ParsePercent(s)
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// MarshalJSON prints the percentage string.
func (p Percent) MarshalJSON() ([]byte, error) { return json.Marshal(p.String()) }
