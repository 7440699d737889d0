package testutil

import (
	"testing"
	"time"
)

// Eventually polls cond until it holds, failing the test when within
// passes first, and returns how long it took: tests synchronise on what
// they wait for, never on a sleep of a guessed length.
func Eventually(tb testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	tb.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			tb.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}
