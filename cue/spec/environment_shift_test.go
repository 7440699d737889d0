package spec

import "testing"

func TestShiftSeconds(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
		bad  bool
	}{
		{"", 60, false},
		{"whole", -1, false},
		{"0", 0, true},
		{"500ms", 0, true},
		{"90s", 90, false},
		{"5m", 300, false},
		{"1500ms", 1, false},
		{"-1m", 0, true},
		{"soon", 0, true},
	} {
		got, err := SimConfig{Shift: c.in}.ShiftSeconds(60)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("ShiftSeconds(%q) = %d, %v; want %d, error %v", c.in, got, err, c.want, c.bad)
		}
	}
}
