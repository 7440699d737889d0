package schedule

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestIdleIsStrict(t *testing.T) {
	now := utc("2026-01-15T12:00:00Z")
	for _, c := range []struct {
		name     string
		activity time.Time
		idle     bool
	}{
		// 11:55 + 5m = 12:00, not before now: still active.
		{"exactly at the timeout", utc("2026-01-15T11:55:00Z"), false},
		{"a second past", utc("2026-01-15T11:54:59Z"), true},
		{"recent", utc("2026-01-15T11:59:00Z"), false},
		{"never", time.Time{}, true},
	} {
		z := DecideZero(now, []Workload{{Name: "fib", Activity: c.activity, Current: 2, Min: 0, AtStart: 1, Idle: 5 * time.Minute}})["fib"]
		if z.Idle != c.idle {
			t.Errorf("%s: idle %v, want %v (%s)", c.name, z.Idle, c.idle, z.Why)
		}
		want := 2
		if c.idle {
			want = 0
		}
		if z.Proposed != want {
			t.Errorf("%s: proposed %d, want %d", c.name, z.Proposed, want)
		}
	}
}

func TestWakeUpAndDue(t *testing.T) {
	loc := paris(t)
	w := Workload{Name: "fib", Current: 0, Min: 0, AtStart: 2, Idle: 30 * time.Minute, Loc: loc,
		WakeUps: []TimeOfDay{tod(t, "08:00")}, Activity: utc("2026-01-14T20:00:00Z")}
	// 07:59 CET: idle since last night; due at the 08:00 wake-up.
	z := DecideZero(utc("2026-01-15T06:59:00Z"), []Workload{w})["fib"]
	if !z.Idle || z.Proposed != 0 || !z.Due.Equal(utc("2026-01-15T07:00:00Z")) {
		t.Fatalf("before the wake-up: %+v", z)
	}
	// 08:00 exactly: the wake-up is activity, the workload wakes to 2.
	z = DecideZero(utc("2026-01-15T07:00:00Z"), []Workload{w})["fib"]
	if z.Idle || z.Proposed != 2 || !strings.Contains(z.From, "wake-up at 08:00") {
		t.Fatalf("at the wake-up: %+v", z)
	}
	// Awake with 2 at 08:10: due when idle (08:30, the first instant
	// past it), before tomorrow's wake-up.
	w.Current = 2
	z = DecideZero(utc("2026-01-15T07:10:00Z"), []Workload{w})["fib"]
	if z.Idle || z.Proposed != 2 || !z.Due.Equal(utc("2026-01-15T07:30:00Z").Add(time.Nanosecond)) {
		t.Fatalf("awake: %+v", z)
	}
	// Below the minimum, active: back to atStart.
	w.Min, w.Current, w.Activity = 3, 1, utc("2026-01-15T07:05:00Z")
	if z := DecideZero(utc("2026-01-15T07:10:00Z"), []Workload{w})["fib"]; z.Proposed != 2 {
		t.Fatalf("below min: %+v", z)
	}
}

// Time-of-day timeouts: 30m in business hours, 5m from 19:00.
func TestTimeoutByTimeOfDay(t *testing.T) {
	loc := paris(t)
	w := Workload{Name: "api", Current: 1, Min: 0, AtStart: 1, Idle: time.Hour, Loc: loc,
		ByTime: []TimeoutFrom{{tod(t, "08:00"), 30 * time.Minute}, {tod(t, "19:00"), 5 * time.Minute}}}
	w.Activity = utc("2026-01-15T17:50:00Z") // 18:50 CET
	// At 19:00 the 5-minute timeout takes over: 18:50 + 5m < 19:00.
	if z := DecideZero(utc("2026-01-15T18:00:00Z"), []Workload{w})["api"]; !z.Idle || z.Timeout != 5*time.Minute {
		t.Fatalf("19:00: %+v", z)
	}
	// At 19:06 the 5-minute timeout is in force: 18:50 + 5m < 19:06.
	if z := DecideZero(utc("2026-01-15T18:06:00Z"), []Workload{w})["api"]; !z.Idle || z.Proposed != 0 {
		t.Fatalf("19:06: %+v", z)
	}
	// At 18:59 the 30-minute one is: active.
	if z := DecideZero(utc("2026-01-15T17:59:00Z"), []Workload{w})["api"]; z.Idle || z.Timeout != 30*time.Minute {
		t.Fatalf("18:59: %+v", z)
	}
}

// A chain web → api → db: db and api count web's activity as their own;
// web wakes only when api has ready replicas, api only when db has.
func TestDependencies(t *testing.T) {
	now := utc("2026-01-15T12:00:00Z")
	ws := []Workload{
		{Name: "web", Activity: utc("2026-01-15T11:59:00Z"), Current: 0, Min: 0, AtStart: 1, Idle: 5 * time.Minute, DependsOn: []string{"api"}},
		{Name: "api", Current: 0, Min: 0, AtStart: 2, Idle: 5 * time.Minute, DependsOn: []string{"db"}},
		{Name: "db", Current: 0, Min: 0, AtStart: 1, Idle: 5 * time.Minute},
	}
	z := DecideZero(now, ws)
	if z["db"].Idle || z["db"].Proposed != 1 || z["db"].From != "dependent api" {
		t.Fatalf("db: %+v", z["db"])
	}
	if z["api"].Proposed != 0 || !slices.Equal(z["api"].Waiting, []string{"db"}) {
		t.Fatalf("api waits for db: %+v", z["api"])
	}
	if z["web"].Proposed != 0 || !slices.Equal(z["web"].Waiting, []string{"api"}) {
		t.Fatalf("web waits for api: %+v", z["web"])
	}
	// db ready: api wakes; then api ready: web wakes.
	ws[2].Current, ws[2].Ready = 1, 1
	if z := DecideZero(now, ws); z["api"].Proposed != 2 || z["web"].Proposed != 0 {
		t.Fatalf("db ready: %+v", z)
	}
	ws[1].Current, ws[1].Ready = 2, 2
	if z := DecideZero(now, ws); z["web"].Proposed != 1 {
		t.Fatalf("api ready: %+v", z["web"])
	}
	// A dependency outside the set is not ready.
	if z := DecideZero(now, []Workload{ws[0]}); z["web"].Proposed != 0 || !slices.Equal(z["web"].Waiting, []string{"api"}) {
		t.Fatalf("missing dependency: %+v", z["web"])
	}
}

// A cycle (refused by validation) does not make DecideZero loop.
func TestCycleDoesNotLoop(t *testing.T) {
	now := utc("2026-01-15T12:00:00Z")
	z := DecideZero(now, []Workload{{Name: "a", DependsOn: []string{"b"}, Activity: now, Idle: time.Minute}, {Name: "b", DependsOn: []string{"a"}, Idle: time.Minute}})
	if z["b"].Activity != now {
		t.Fatalf("b: %+v", z["b"])
	}
}

// TestSkippedWakeUpIsLabelledAsItRan: on 2026-03-29 Paris clocks jump from
// 02:00 CET to 03:00 CEST (01:00 UTC); a 02:30 wake-up runs at the jump.
// The plan names the 02:30 wake-up and the 03:00 CEST it ran at, never a
// "wake-up at 03:00" the spec does not have; on an ordinary day it is
// "wake-up at 02:30".
func TestSkippedWakeUpIsLabelledAsItRan(t *testing.T) {
	loc := paris(t)
	w := Workload{Name: "fib", Current: 0, AtStart: 1, Idle: time.Hour, Loc: loc, WakeUps: []TimeOfDay{tod(t, "02:30")}}
	z := DecideZero(utc("2026-03-29T01:10:00Z"), []Workload{w})["fib"]
	if z.Idle || !z.Activity.Equal(utc("2026-03-29T01:00:00Z")) {
		t.Fatalf("the skipped wake-up: %+v; want active from 01:00 UTC", z)
	}
	if want := "wake-up 02:30, run at 03:00 CEST: the clock change skipped 02:30 that day"; z.From != want || strings.Contains(z.Why, "wake-up at 03:00") {
		t.Errorf("from %q (%s); want %q", z.From, z.Why, want)
	}
	z = DecideZero(utc("2026-03-30T00:40:00Z"), []Workload{w})["fib"]
	if z.From != "wake-up at 02:30" {
		t.Errorf("the next day: from %q; want wake-up at 02:30", z.From)
	}
}
