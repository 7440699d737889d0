package testutil

import (
	"testing"
	"time"
)

// fatalRecorder keeps what Fatal was given instead of ending the test.
type fatalRecorder struct {
	testing.TB
	fatal string
}

func (f *fatalRecorder) Helper()           {}
func (f *fatalRecorder) Fatal(args ...any) { f.fatal = args[0].(string) }

// A condition that never holds fails with what was waited for, the last
// thing it saw and what more adds; one that holds returns at once.
func TestPoll(t *testing.T) {
	r := &fatalRecorder{TB: t}
	looks := 0
	Poll(r, 0, time.Millisecond, "pods ready", func() (bool, string) {
		looks++
		return false, "2 of 3"
	}, func() string { return "the logs" })
	if want := "pods ready: not within 0s; last: 2 of 3\nthe logs"; r.fatal != want {
		t.Fatalf("failure %q, want %q", r.fatal, want)
	}
	if looks != 1 {
		t.Fatalf("looked %d times before failing, want once", looks)
	}
	r = &fatalRecorder{TB: t}
	Poll(r, time.Hour, time.Millisecond, "done", func() (bool, string) { return true, "" }, nil)
	if r.fatal != "" {
		t.Fatalf("a condition that holds failed: %q", r.fatal)
	}
}
