//go:build linux

package dataplane

import (
	"fmt"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/setpoint-dev/setpoint/engine/decide/routegroup"
	"github.com/setpoint-dev/setpoint/internal/bpftest"
	"golang.org/x/sys/unix"
)

// maglevTables builds two weighted Maglev tables of 65,537 slots for
// backends 0..n−1 (uneven weights), the second without backend 0, so
// successive publishes alternate between real tables.
func maglevTables(n int) [2][]uint32 {
	names := make([]string, n)
	weights := make([]float64, n)
	for i := range names {
		names[i] = fmt.Sprintf("backend-%04d", i)
		weights[i] = float64(1 + i%7)
	}
	var out [2][]uint32
	for k := range out {
		if k == 1 {
			weights[0] = 0
		}
		out[k] = make([]uint32, 65537)
		routegroup.Maglev(names, routegroup.Apportion(weights, 65537), out[k])
	}
	return out
}

// BenchmarkPublish is one publish of a 65,537-slot table for 1,000
// backends: the table and the failsafe list written to the inactive side,
// then the epoch flipped (goal ≤ 15 ms, of which the flip ≤ 50 µs).
// flip-µs is the mean of Flip.Took, the epoch write alone.
func BenchmarkPublish(b *testing.B) {
	bpftest.RequireRoot(b)
	d, err := Load(Options{Groups: 1, Slots: 65537})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	tables := maglevTables(1000)
	healthy := ids(1000)
	var flips, publish, quiet time.Duration
	n := 0
	for b.Loop() {
		// The wait for the connects on the last flip's old side runs off
		// the publish path, between ticks (200 ms apart): here it is
		// waited out, and measured, before the publish is timed.
		b.StopTimer()
		q := time.Now()
		if err := d.waitQuiet(); err != nil {
			b.Fatal(err)
		}
		quiet += time.Since(q)
		b.StartTimer()
		p := time.Now()
		f, err := d.Publish(0, tables[n%2], healthy)
		if err != nil {
			b.Fatal(err)
		}
		publish += time.Since(p)
		flips += f.Took
		n++
	}
	b.ReportMetric(float64(flips.Nanoseconds())/float64(n)/1e3, "flip-µs")
	b.ReportMetric(float64(publish.Nanoseconds())/float64(n)/1e6, "publish-ms")
	b.ReportMetric(float64(quiet.Nanoseconds())/float64(n)/1e6, "quiesce-ms")
	// The last publish is the active table, whole.
	act, err := d.Active(0)
	if err != nil || len(act) != 65537 || act[0] != tables[(n-1)%2][0] {
		b.Fatalf("after %d publishes the active table has %d slots (err %v)", n, len(act), err)
	}
}

// BenchmarkConnect is one connect to a VIP of 3 loopback backends from a
// cgroup the program is attached to. ns/op is the whole round trip
// (socket, connect, accept by the server, getpeername, close with RST);
// prog-ns/connect is the program's own run time per run, from the
// kernel's BPF run-time statistics (goal ≤ 0.5 µs).
func BenchmarkConnect(b *testing.B) {
	bpftest.RequireRoot(b)
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		b.Fatalf("enabling BPF run-time statistics: %v", err)
	}
	b.Cleanup(func() { stats.Close() })
	d, _ := setup(b, 3, Options{})
	if _, err := d.Publish(0, table(routegroup.Apportion([]float64{0.5, 0.3, 0.2}, 65537)), ids(3)); err != nil {
		b.Fatal(err)
	}
	before, err := d.program().Stats()
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for b.Loop() {
		if _, err := bpftest.Connect(vip); err != nil {
			b.Fatalf("connect: %v", err)
		}
		n++
	}
	after, err := d.program().Stats()
	if err != nil {
		b.Fatal(err)
	}
	runs := after.RunCount - before.RunCount
	if runs < uint64(n) {
		b.Fatalf("%d connects, the program ran %d times: are run-time statistics on?", n, runs)
	}
	b.ReportMetric(float64((after.Runtime-before.Runtime).Nanoseconds())/float64(runs), "prog-ns/connect")
	if st, _ := d.Stats(0); st.Routed < uint64(n) || st.Missed != 0 {
		b.Fatalf("stats %+v after %d connects: want all routed, none missed", st, n)
	}
}
