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
	return Poll(tb, within, 10*time.Millisecond, what, func() (bool, string) { return cond(), "" }, nil)
}

// Poll is Eventually for a condition that says where it stands, checked
// every every (a look at an API server or a query costs more than a
// flag): cond reports whether it holds and, when not, what it saw. A
// failure names the last of those, and what more adds (a process's logs)
// when more is not nil.
func Poll(tb testing.TB, within, every time.Duration, what string, cond func() (bool, string), more func() string) time.Duration {
	tb.Helper()
	start := time.Now()
	for {
		ok, last := cond()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > within {
			msg := what + ": not within " + within.String()
			if last != "" {
				msg += "; last: " + last
			}
			if more != nil {
				msg += "\n" + more()
			}
			tb.Fatal(msg)
			return time.Since(start)
		}
		time.Sleep(every)
	}
}
