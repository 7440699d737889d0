package state

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckHeld: a lock file removed or replaced while held is reported,
// since a second process could lock the new file.
func TestCheckHeld(t *testing.T) {
	for _, how := range []string{"removed", "replaced"} {
		path := filepath.Join(t.TempDir(), "state.json")
		b := NewFile(path).(*fileBackend)
		if err := b.CheckHeld(); err == nil {
			t.Fatal("not locked: not held")
		}
		unlock, err := b.Lock(context.Background(), "test", false)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.CheckHeld(); err != nil {
			t.Fatalf("held: %v", err)
		}
		if err := os.Remove(path + ".lock"); err != nil {
			t.Fatal(err)
		}
		if how == "replaced" {
			// A second process takes the new file: possible only now.
			other := NewFile(path)
			u2, err := other.Lock(context.Background(), "other", false)
			if err != nil {
				t.Fatalf("the second lock: %v", err)
			}
			defer u2()
		}
		if err := b.CheckHeld(); err == nil || !strings.Contains(err.Error(), how) {
			t.Fatalf("%s: %v", how, err)
		}
		unlock()
		if err := b.CheckHeld(); err == nil {
			t.Fatal("unlocked: not held")
		}
	}
}
