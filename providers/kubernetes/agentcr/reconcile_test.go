package agentcr

import (
	"testing"
	"time"
)

// When a node rewrites its status entry: at once for a new generation or
// message, after keyEvery for a changed key, after refresh for nothing.
func TestReportDue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	last := report{generation: 2, message: "ok", key: "laminar/normal/2", at: t0}
	at := func(d time.Duration, gen int64, msg, key string) report {
		return report{generation: gen, message: msg, key: key, at: t0.Add(d)}
	}
	const refresh, keyEvery = 30 * time.Second, 10 * time.Second
	for _, tc := range []struct {
		name string
		next report
		want bool
	}{
		{"nothing changed, within refresh", at(29*time.Second, 2, "ok", "laminar/normal/2"), false},
		{"nothing changed, refresh passed", at(30*time.Second, 2, "ok", "laminar/normal/2"), true},
		{"a new generation, at once", at(time.Millisecond, 3, "ok", "laminar/normal/2"), true},
		{"a new message, at once", at(time.Millisecond, 2, "refused", "laminar/normal/2"), true},
		{"the key changed, before keyEvery", at(9*time.Second, 2, "ok", "laminar/normal/3"), false},
		{"the key changed, keyEvery passed", at(10*time.Second, 2, "ok", "laminar/normal/3"), true},
		{"a clock gone back", at(-time.Minute, 2, "ok", "laminar/normal/3"), false},
	} {
		if got := reportDue(last, tc.next, refresh, keyEvery); got != tc.want {
			t.Errorf("%s: due %v, want %v", tc.name, got, tc.want)
		}
	}
}
