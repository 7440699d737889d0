package clock

import (
	"testing"
	"time"
)

func TestVirtual(t *testing.T) {
	t0 := time.Date(2023, 11, 16, 18, 15, 46, 0, time.UTC)
	v := NewVirtual(t0)
	v.Advance(5 * time.Second)
	v.Set(t0) // never backwards
	if got := v.Now(); !got.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("virtual: %v", got)
	}
}
