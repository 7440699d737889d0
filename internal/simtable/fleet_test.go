package simtable

import (
	"strings"
	"testing"
	"time"
)

// TestFleetTable: node steps per cluster, worked by hand. Over a run of
// 1h30m, east-a steps at 5m, 10m, 20m, 1h4m and 1h5m: 5 steps, 5 ÷ 1.5 =
// 3.3 an hour, and at most 4 in any hour (5m, 10m, 20m and 1h4m lie within
// 59m; 5m and 1h5m are an hour apart). east-b steps once, at 1h29m: 0.7 an
// hour; east-c never, short for 2m + 10s. The line above them is the
// fleet's, as before.
func TestFleetTable(t *testing.T) {
	f := FleetResult{Fleet: "streaming/streaming", Clusters: 3, Nodes: 21, Created: 1, Deleted: 0}
	for _, at := range []time.Duration{10 * time.Minute, 5 * time.Minute, 20 * time.Minute, time.Hour + 4*time.Minute, time.Hour + 5*time.Minute} {
		f.Step("east-a", at)
	}
	f.Step("east-b", time.Hour+29*time.Minute)
	f.Short("east-c", 2*time.Minute)
	f.Short("east-c", 10*time.Second)
	f.Short("east-a", 0)
	f.Finish(90 * time.Minute)
	var rows []string
	for _, l := range strings.Split(FleetTable(f), "\n") {
		rows = append(rows, strings.Join(strings.Fields(l), " "))
	}
	got := strings.Join(rows, "\n")
	want := strings.Join([]string{
		"fleet streaming/streaming: 3 clusters, 21 nodes at the end; 1 created, 0 deleted, 6 node steps",
		"cluster node steps an hour most in an hour short",
		"east-a 5 3.3 4 0s",
		"east-b 1 0.7 1 0s",
		"east-c 0 0.0 0 2m10s",
		"",
	}, "\n")
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// Without a measure of short, no column for it; without a step or a
// short cluster, only the fleet's line.
func TestFleetTableWithout(t *testing.T) {
	f := FleetResult{Fleet: "a/b"}
	f.Step("c", time.Minute)
	f.Finish(time.Hour)
	if got := FleetTable(f); strings.Contains(got, "short") || !strings.Contains(got, "  c  ") {
		t.Errorf("no short measured:\n%s", got)
	}
	if got := FleetTable(FleetResult{Fleet: "a/b"}); strings.Count(got, "\n") != 1 {
		t.Errorf("nothing per cluster:\n%s", got)
	}
}

func TestMostInAnHour(t *testing.T) {
	m := time.Minute
	for _, c := range []struct {
		at   []time.Duration
		want int
	}{
		{nil, 0},
		{[]time.Duration{0}, 1},
		// 60m apart: not in one hour.
		{[]time.Duration{0, 60 * m}, 1},
		{[]time.Duration{0, 59 * m}, 2},
		{[]time.Duration{0, 30 * m, 70 * m, 80 * m, 89 * m}, 4},
	} {
		if got := mostInAnHour(c.at); got != c.want {
			t.Errorf("%v: %d, want %d", c.at, got, c.want)
		}
	}
}
