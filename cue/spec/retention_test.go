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
