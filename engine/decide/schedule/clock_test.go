package schedule

import (
	"testing"
	"time"
)

func paris(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func tod(t *testing.T, s string) TimeOfDay {
	t.Helper()
	v, err := ParseTimeOfDay(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func utc(s string) time.Time {
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return v
}

func TestParseTimeOfDay(t *testing.T) {
	for _, bad := range []string{"8:00", "24:00", "12:60", "12-00", "ab:cd", "", "12:000"} {
		if _, err := ParseTimeOfDay(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if v := tod(t, "23:59"); v.Hour != 23 || v.Minute != 59 || v.String() != "23:59" {
		t.Fatal(v)
	}
}

// Europe/Paris: on 2026-03-29 clocks jump from 02:00 CET to 03:00 CEST
// (01:00 UTC); on 2026-10-25 they go back from 03:00 CEST to 02:00 CET
// (01:00 UTC).
func TestOnAcrossDST(t *testing.T) {
	loc := paris(t)
	for _, c := range []struct {
		name string
		at   string
		y    int
		m    time.Month
		d    int
		want string
	}{
		{"winter", "08:00", 2026, time.January, 15, "2026-01-15T07:00:00Z"},
		{"summer", "08:00", 2026, time.July, 15, "2026-07-15T06:00:00Z"},
		// 02:30 does not exist that day: it happens at the jump.
		{"skipped by spring forward", "02:30", 2026, time.March, 29, "2026-03-29T01:00:00Z"},
		{"just before the jump", "01:59", 2026, time.March, 29, "2026-03-29T00:59:00Z"},
		{"just after the jump", "03:00", 2026, time.March, 29, "2026-03-29T01:00:00Z"},
		// 02:30 is shown twice: CEST (00:30 UTC) then CET (01:30 UTC).
		{"shown twice at fall back", "02:30", 2026, time.October, 25, "2026-10-25T00:30:00Z"},
		{"after fall back", "03:00", 2026, time.October, 25, "2026-10-25T02:00:00Z"},
		{"midnight", "00:00", 2026, time.March, 29, "2026-03-28T23:00:00Z"},
	} {
		got := tod(t, c.at).On(c.y, c.m, c.d, loc)
		if !got.Equal(utc(c.want)) {
			t.Errorf("%s: %s on %d-%02d-%02d is %s, want %s", c.name, c.at, c.y, c.m, c.d, got.UTC().Format(time.RFC3339), c.want)
		}
	}
}

func TestWakeUps(t *testing.T) {
	loc := paris(t)
	wakes := []TimeOfDay{tod(t, "08:00"), tod(t, "13:30"), tod(t, "23:30")}
	for _, c := range []struct {
		now, last, next string
	}{
		// 2026-01-15 is CET (UTC+1).
		{"2026-01-15T06:59:00Z", "2026-01-14T22:30:00Z", "2026-01-15T07:00:00Z"}, // 07:59 local: yesterday's 23:30
		{"2026-01-15T07:00:00Z", "2026-01-15T07:00:00Z", "2026-01-15T12:30:00Z"}, // exactly 08:00: it counts
		{"2026-01-15T23:10:00Z", "2026-01-15T22:30:00Z", "2026-01-16T07:00:00Z"}, // 00:10 the next day, across midnight
		// Across the spring jump: 08:00 CEST is 06:00 UTC.
		{"2026-03-29T05:00:00Z", "2026-03-28T22:30:00Z", "2026-03-29T06:00:00Z"},
	} {
		now := utc(c.now)
		if got := LastWakeUp(now, loc, wakes); !got.Equal(utc(c.last)) {
			t.Errorf("last wake-up at %s: %s, want %s", c.now, got.UTC().Format(time.RFC3339), c.last)
		}
		if got := NextWakeUp(now, loc, wakes); !got.Equal(utc(c.next)) {
			t.Errorf("next wake-up at %s: %s, want %s", c.now, got.UTC().Format(time.RFC3339), c.next)
		}
	}
	if !LastWakeUp(utc("2026-01-15T07:00:00Z"), loc, nil).IsZero() || !NextWakeUp(utc("2026-01-15T07:00:00Z"), loc, nil).IsZero() {
		t.Fatal("no wake-ups, yet one")
	}
}

func TestTimeoutAt(t *testing.T) {
	loc := paris(t)
	entries := []TimeoutFrom{{tod(t, "19:00"), 5 * time.Minute}, {tod(t, "08:00"), 30 * time.Minute}}
	for _, c := range []struct {
		now   string
		want  time.Duration
		since string
	}{
		{"2026-01-15T06:00:00Z", 5 * time.Minute, "2026-01-14T18:00:00Z"},  // 07:00: yesterday's 19:00 holds
		{"2026-01-15T07:00:00Z", 30 * time.Minute, "2026-01-15T07:00:00Z"}, // 08:00 exactly
		{"2026-01-15T17:59:00Z", 30 * time.Minute, "2026-01-15T07:00:00Z"}, // 18:59
		{"2026-01-15T18:00:00Z", 5 * time.Minute, "2026-01-15T18:00:00Z"},  // 19:00
		// The fall-back day is 25 hours long; 19:00 CET is 18:00 UTC.
		{"2026-10-25T18:30:00Z", 5 * time.Minute, "2026-10-25T18:00:00Z"},
		{"2026-10-25T17:30:00Z", 30 * time.Minute, "2026-10-25T07:00:00Z"},
	} {
		got, since := TimeoutAt(utc(c.now), loc, time.Hour, entries)
		if got != c.want || !since.Equal(utc(c.since)) {
			t.Errorf("at %s: %s since %s, want %s since %s", c.now, got, since.UTC().Format(time.RFC3339), c.want, c.since)
		}
	}
	if got, _ := TimeoutAt(utc("2026-01-15T06:00:00Z"), loc, time.Hour, nil); got != time.Hour {
		t.Fatalf("default: %s", got)
	}
}
