package spec_test

import (
	"testing"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
)

// TestEmbeddedRetention: the memory window is checked at validate against
// the embedded store's real retention, which package spec cannot import
// (the store's package imports spec).
func TestEmbeddedRetention(t *testing.T) {
	if spec.EmbeddedRetention != embedded.DefaultRetention {
		t.Fatalf("spec.EmbeddedRetention %v, embedded.DefaultRetention %v", spec.EmbeddedRetention, embedded.DefaultRetention)
	}
}

// TestDefaultLookbackDelta: the schema's default lookback is the embedded
// source's.
func TestDefaultLookbackDelta(t *testing.T) {
	if spec.DefaultLookbackDelta != embedded.DefaultLookbackDelta {
		t.Fatalf("spec.DefaultLookbackDelta %v, embedded.DefaultLookbackDelta %v", spec.DefaultLookbackDelta, embedded.DefaultLookbackDelta)
	}
}
