//go:build linux

package dataplane

import (
	"errors"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/decide/routegroup"
	"github.com/setpoint-dev/setpoint/internal/bpftest"
	"github.com/setpoint-dev/setpoint/internal/testutil"
	"golang.org/x/sys/unix"
)

var vip = netip.MustParseAddrPort("127.100.0.1:8080")

// setup loads the program into this kernel, attaches it to a child cgroup
// holding the test, and names n loopback backends as ids 0..n−1 of group 0.
func setup(t testing.TB, n int, opts Options) (*Dataplane, []netip.AddrPort) {
	t.Helper()
	cg := bpftest.Cgroup(t)
	if opts.Groups == 0 {
		opts = Options{Groups: 2, Slots: 65537, PinDir: opts.PinDir}
	}
	d, err := Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if _, err := d.Attach(cg); err != nil {
		t.Fatal(err)
	}
	servers := bpftest.Servers(t, n)
	for i, s := range servers {
		if err := d.SetBackend(0, uint32(i), s); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.SetVIP(0, vip, TCP); err != nil {
		t.Fatal(err)
	}
	if err := d.SetControl(0, Control{Failsafe: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := d.Heartbeat(0, Monotonic()); err != nil {
		t.Fatal(err)
	}
	return d, servers
}

func table(counts []int) []uint32 {
	names := make([]string, len(counts))
	for i := range names {
		names[i] = string(rune('a' + i))
	}
	out := make([]uint32, 65537)
	routegroup.Maglev(names, counts, out)
	return out
}

func ids(n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(i)
	}
	return out
}

// storm connects n times and counts connects by the backend reached.
func storm(t *testing.T, n int, servers []netip.AddrPort) ([]int, int) {
	t.Helper()
	by := map[netip.AddrPort]int{}
	for i, s := range servers {
		by[s] = i
	}
	got := make([]int, len(servers))
	refused := 0
	for range n {
		peer, err := bpftest.Connect(vip)
		if errors.Is(err, unix.EPERM) {
			refused++
			continue
		}
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		i, ok := by[peer]
		if !ok {
			t.Fatalf("a connect reached %s, no backend of the group", peer)
		}
		got[i]++
	}
	return got, refused
}

// Over 100,000 connects the split follows the table within 2 points.
func TestSplitFollowsTheTable(t *testing.T) {
	d, servers := setup(t, 3, Options{})
	counts := routegroup.Apportion([]float64{0.5, 0.3, 0.2}, 65537)
	if _, err := d.Publish(0, table(counts), ids(3)); err != nil {
		t.Fatal(err)
	}
	const n = 100000
	got, _ := storm(t, n, servers)
	for i := range got {
		share, want := float64(got[i])/n, float64(counts[i])/65537
		t.Logf("backend %d: %.4f of connects, table %.4f", i, share, want)
		if math.Abs(share-want) > 0.02 {
			t.Errorf("backend %d took %.4f of connects, the table gives it %.4f", i, share, want)
		}
	}
	c, err := d.Counters(0, ids(3))
	if err != nil {
		t.Fatal(err)
	}
	for i := range c {
		if c[i] != uint64(got[i]) {
			t.Errorf("counter %d = %d, %d connects reached it", i, c[i], got[i])
		}
	}
	if st, _ := d.Stats(0); st.Routed != n || st.Missed != 0 {
		t.Errorf("stats %+v, want %d routed and none missed", st, n)
	}
}

// Tables that each send everything to one backend, cycled through three
// backends under a storm: a connect that starts after one flip and ends
// before the next must reach that table's backend. Reading the side being
// written would show the backend of two tables ago.
func TestFlipIsAtomicUnderAStorm(t *testing.T) {
	d, servers := setup(t, 3, Options{})
	all := func(id uint32) []uint32 {
		out := make([]uint32, 65537)
		for i := range out {
			out[i] = id
		}
		return out
	}
	tables := [][]uint32{all(0), all(1), all(2)}
	if _, err := d.Publish(0, tables[0], ids(3)); err != nil {
		t.Fatal(err)
	}
	type flip struct {
		start, done time.Time
		backend     int
	}
	var mu sync.Mutex
	flips := []flip{{done: time.Now(), backend: 0}}
	type hit struct {
		start, end time.Time
		backend    int
	}
	var hits []hit
	var stop atomic.Bool
	var done atomic.Int64
	var wg sync.WaitGroup
	by := map[netip.AddrPort]int{servers[0]: 0, servers[1]: 1, servers[2]: 2}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []hit
			for !stop.Load() {
				s := time.Now()
				peer, err := bpftest.Connect(vip)
				e := time.Now()
				if err != nil {
					t.Errorf("connect: %v", err)
					return
				}
				mine = append(mine, hit{s, e, by[peer]})
				done.Add(1)
			}
			mu.Lock()
			hits = append(hits, mine...)
			mu.Unlock()
		}()
	}
	for k := 1; k <= 60; k++ {
		f, err := d.Publish(0, tables[k%3], ids(3))
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		// The window of the table before this one ends when the epoch
		// write began: writing the inactive side falls inside it.
		flips = append(flips, flip{start: f.At, done: time.Now(), backend: k % 3})
		mu.Unlock()
		// Let some connects run wholly on this table before the next write.
		after := done.Load() + 20
		testutil.Eventually(t, 10*time.Second, "connects after a flip", func() bool { return done.Load() >= after })
	}
	stop.Store(true)
	wg.Wait()
	checked := 0
	for _, h := range hits {
		for k := range flips {
			if h.start.After(flips[k].done) && (k+1 == len(flips) || h.end.Before(flips[k+1].start)) {
				checked++
				if h.backend != flips[k].backend {
					t.Fatalf("a connect between flips %d and %d reached backend %d, the table sent all to %d", k, k+1, h.backend, flips[k].backend)
				}
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d of %d connects fell between flips: the test checked too little", checked, len(hits))
	}
	t.Logf("%d connects, %d checked between flips", len(hits), checked)
}

func TestAdmission(t *testing.T) {
	d, servers := setup(t, 2, Options{})
	if _, err := d.Publish(0, table([]int{32768, 32769}), ids(2)); err != nil {
		t.Fatal(err)
	}
	t.Run("soft sheds its fraction", func(t *testing.T) {
		if err := d.SetControl(0, Control{Mode: AdmitSoft, Shed: 0.5, Failsafe: time.Hour}); err != nil {
			t.Fatal(err)
		}
		got, refused := storm(t, 4000, servers)
		// Binomial(4000, 0.5): σ ≈ 32; 45–55% is over 6σ.
		if refused < 1800 || refused > 2200 || got[0]+got[1]+refused != 4000 {
			t.Errorf("shed 50%%: %d of 4000 refused, %v admitted", refused, got)
		}
	})
	t.Run("hard admits its budget", func(t *testing.T) {
		if err := d.SetControl(0, Control{Mode: AdmitHard, Budget: 100, Burst: 50, Failsafe: time.Hour}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		got, refused := storm(t, 2000, servers)
		elapsed := time.Since(start).Seconds()
		admitted := got[0] + got[1]
		// A full bucket of 50, plus 100/s for as long as the storm took.
		if admitted < 50 || float64(admitted) > 50+100*elapsed+1 || refused == 0 {
			t.Errorf("budget 100/s burst 50 over %.2fs: %d admitted, %d refused", elapsed, admitted, refused)
		}
		t.Logf("%d admitted, %d refused in %.3fs", admitted, refused, elapsed)
		if st, _ := d.Stats(0); st.Refused != uint64(refused) {
			t.Errorf("stats say %d refused, the clients saw %d", st.Refused, refused)
		}
	})
	t.Run("a new admission starts with a full bucket", func(t *testing.T) {
		// One connect in 100s: over the test's time, even on a busy
		// machine, the refill is nothing, so what is admitted is what
		// the bucket held when the control changed. (At 1/s a storm of
		// 20 stretched past a second by load would refill one more.)
		if err := d.SetControl(0, Control{Mode: AdmitHard, Budget: 0.01, Burst: 1, Failsafe: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if got, refused := storm(t, 20, servers); got[0]+got[1] > 2 || refused < 18 {
			t.Fatalf("burst 1: %v admitted, %d refused", got, refused)
		}
		if err := d.SetControl(0, Control{Mode: AdmitHard, Budget: 0.01, Burst: 5, Failsafe: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if got, _ := storm(t, 20, servers); got[0]+got[1] < 5 {
			t.Errorf("burst 5 after a drained bucket: %v admitted, want the new burst of 5", got)
		}
	})
	t.Run("the largest bucket admits its burst", func(t *testing.T) {
		// 1e6 connects of 1e12 units each: 1e18, inside a u64. A bucket
		// past the bound would wrap and refuse what it should admit.
		if err := d.SetControl(0, Control{Mode: AdmitHard, Budget: MaxBudget, Burst: MaxBurst, Failsafe: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if _, refused := storm(t, 500, servers); refused != 0 {
			t.Errorf("budget %d/s burst %d: %d of 500 refused", MaxBudget, MaxBurst, refused)
		}
	})
	t.Run("normal admits all", func(t *testing.T) {
		if err := d.SetControl(0, Control{Mode: AdmitNormal, Failsafe: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if _, refused := storm(t, 500, servers); refused != 0 {
			t.Errorf("%d refused in normal mode", refused)
		}
	})
}

// When the heartbeat stops, connects split evenly over the healthy
// backends whatever the table says; a fresh heartbeat restores the table.
//
// What must not have happened yet (the failsafe before its threshold) is
// checked under a threshold of an hour, so a busy machine cannot stretch
// the test past it; the short threshold is set only to watch the failsafe
// engage, which waits on the program's own count, however long it takes.
func TestFailsafeWhenTheHeartbeatStops(t *testing.T) {
	d, servers := setup(t, 3, Options{})
	// The table sends everything to 0; the failsafe list holds 1 and 2.
	only0 := table([]int{65537, 0, 0})
	if _, err := d.Publish(0, only0, []uint32{1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := d.SetControl(0, Control{Mode: AdmitHard, Budget: 1, Burst: 1, Failsafe: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := d.Heartbeat(0, Monotonic()); err != nil {
		t.Fatal(err)
	}
	if got, _ := storm(t, 1, servers); got[0] != 1 {
		t.Fatalf("with a fresh heartbeat: %v, want the table's backend 0", got)
	}
	if s, _ := d.Stats(0); s.Failsafe != 0 {
		t.Fatalf("stats %+v: the failsafe engaged within its threshold of an hour", s)
	}
	// The heartbeat stops: it grows older than a threshold of 50ms.
	if err := d.SetControl(0, Control{Mode: AdmitHard, Budget: 1, Burst: 1, Failsafe: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the failsafe to engage", func() bool {
		s, _ := d.Stats(0)
		_, _ = bpftest.Connect(vip)
		s2, _ := d.Stats(0)
		return s2.Failsafe > s.Failsafe
	})
	got, refused := storm(t, 3000, servers)
	// Admission is off in failsafe: the budget of 1/s refuses nothing.
	if refused != 0 || got[0] != 0 {
		t.Errorf("failsafe: %v, %d refused; want nothing refused and nothing to backend 0", got, refused)
	}
	for _, i := range []int{1, 2} {
		if share := float64(got[i]) / 3000; math.Abs(share-0.5) > 0.05 {
			t.Errorf("failsafe: backend %d took %.3f, want an even 0.5", i, share)
		}
	}
	// A fresh heartbeat, judged against a threshold the 20 connects
	// cannot outlast on a busy machine.
	if err := d.SetControl(0, Control{Mode: AdmitNormal, Failsafe: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := d.Heartbeat(0, Monotonic()); err != nil {
		t.Fatal(err)
	}
	if got, _ := storm(t, 20, servers); got[0] != 20 {
		t.Errorf("after a fresh heartbeat: %v, want the table's backend 0 again", got)
	}
}

// A pinned dataplane stays attached when its agent's process lets go, and a
// new agent resumes it: same tables, same link.
func TestPinnedLinkOutlivesTheAgent(t *testing.T) {
	dir := bpftest.BPFFS(t) + "/setpoint"
	d, servers := setup(t, 2, Options{Groups: 2, Slots: 65537, PinDir: dir})
	if _, err := d.Publish(0, table([]int{0, 65537}), ids(2)); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// No process holds the program now: only the pins.
	if got, _ := storm(t, 10, servers); got[1] != 10 {
		t.Fatalf("after the agent let go: %v, want the table's backend 1 still", got)
	}
	// What the pins say, read by another (a test, an operator).
	pinned, err := OpenPinned(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer pinned.Close()
	if g, ok, err := pinned.Group(vip, TCP); err != nil || !ok || g != 0 {
		t.Fatalf("the pinned VIP's group: %d, %v, %v; want 0", g, ok, err)
	}
	if _, ok, err := pinned.Group(vip, UDP); err != nil || ok {
		t.Fatalf("a VIP not routed (UDP): %v, %v", ok, err)
	}
	if at, failsafe, err := pinned.Heartbeat(0); err != nil || at == 0 || at > Monotonic() || failsafe != time.Hour {
		t.Fatalf("the pinned heartbeat %d (now %d), failsafe %v, %v; want setup's, within an hour", at, Monotonic(), failsafe, err)
	}
	if s, err := pinned.Stats(0); err != nil || s != (Stats{}) {
		t.Fatalf("the pinned stats %+v, %v: the table routed everything", s, err)
	}
	d2, err := Load(Options{Groups: 2, Slots: 65537, PinDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	resumed, err := d2.Attach("/nonexistent: the pinned link is used")
	if err != nil || !resumed {
		t.Fatalf("resume: %v, resumed %v", err, resumed)
	}
	if act, err := d2.Active(0); err != nil || len(act) != 65537 || act[0] != 1 {
		t.Fatalf("resumed active table: %d slots, err %v", len(act), err)
	}
	if vips, err := d2.VIPs(); err != nil || len(vips) != 1 {
		t.Fatalf("resumed VIPs %v, err %v", vips, err)
	} else if g, ok := vips[VIP{vip, TCP}]; !ok || g != 0 {
		t.Fatalf("resumed VIPs %v: want %s/tcp in group 0", vips, vip)
	}
	// One process at a time holds the pins: a second agent, or a cleanup
	// under a running one, is refused.
	if d3, err := Load(Options{Groups: 2, Slots: 65537, PinDir: dir}); !errors.Is(err, ErrPinDirBusy) {
		if d3 != nil {
			d3.Close()
		}
		t.Fatalf("a second process on the held pins: %v, want %v", err, ErrPinDirBusy)
	}
	// A group given to someone else forgets the VIPs that pointed at it,
	// and only those.
	other := netip.MustParseAddrPort("127.0.0.1:7")
	if err := d2.SetVIP(1, other, TCP); err != nil {
		t.Fatal(err)
	}
	if err := d2.ClearGroup(1); err != nil {
		t.Fatal(err)
	}
	if vips, err := d2.VIPs(); err != nil || len(vips) != 1 || vips[VIP{vip, TCP}] != 0 {
		t.Fatalf("VIPs after clearing group 1: %v, err %v; want only %s in group 0", vips, err, vip)
	}
	if bs, err := d2.Backends(0); err != nil || bs[1] != servers[1] {
		t.Fatalf("resumed backends %v, err %v", bs, err)
	}
	if err := d2.Cleanup(); err != nil {
		t.Fatal(err)
	}
	// Detached: the VIP is not rewritten, so nothing listens there.
	if _, err := bpftest.Connect(vip); err == nil {
		t.Fatal("after cleanup a connect to the VIP still reached a backend")
	}
}

func TestBadInput(t *testing.T) {
	bpftest.RequireRoot(t)
	if _, err := Load(Options{Groups: 0, Slots: 7}); err == nil {
		t.Error("0 groups: no error")
	}
	d, err := Load(Options{Groups: 1, Slots: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Publish(0, make([]uint32, 8), nil); err == nil {
		t.Error("a table larger than the maps: no error")
	}
	if _, err := d.Publish(0, []uint32{0, 0, 0, 0, 0, 0, MaxBackends}, nil); err == nil {
		t.Error("an id past the backends: no error")
	}
	if _, err := d.Publish(1, make([]uint32, 7), nil); err == nil {
		t.Error("a group past the maps: no error")
	}
	if err := d.SetVIP(0, netip.MustParseAddrPort("[::1]:80"), TCP); err == nil {
		t.Error("an IPv6 VIP: no error")
	}
	for _, c := range []Control{
		{Mode: AdmitHard, Budget: 1, Burst: MaxBurst + 1, Failsafe: time.Hour},
		{Mode: AdmitHard, Budget: MaxBudget + 1, Failsafe: time.Hour},
		{Mode: AdmitSoft, Shed: math.NaN(), Failsafe: time.Hour},
		{Mode: AdmitNormal},
	} {
		if err := d.SetControl(0, c); err == nil {
			t.Errorf("control %+v: no error", c)
		}
	}
}

// What Publish copies into the mapped slot map is, slot by slot, what the
// program reads through the map: every slot of an irregular table (a
// wrong stride or offset would shift or fold it), on both sides.
func TestPublishedTableIsTheKernels(t *testing.T) {
	d, _ := setup(t, 3, Options{})
	r := rand.New(rand.NewPCG(5, 6))
	for range 2 {
		want := make([]uint32, 65537)
		for i := range want {
			want[i] = uint32(r.IntN(3))
		}
		f, err := d.Publish(1, want, ids(3))
		if err != nil {
			t.Fatal(err)
		}
		si := 1*2 + f.Epoch&1
		for i, id := range want {
			k := si*65537 + uint32(i)
			var got uint32
			if err := d.objs.Slots.Lookup(&k, &got); err != nil || got != id {
				t.Fatalf("epoch %d, slot %d: the map holds %d (%v), the table %d", f.Epoch, i, got, err, id)
			}
		}
		if act, err := d.Active(1); err != nil || !slices.Equal(act, want) {
			t.Fatalf("epoch %d: Active differs from the table published (%v)", f.Epoch, err)
		}
	}
}

// An agent upgraded over a live dataplane pinned by one before the slot
// map was mapped resumes those pins as they are (writing the slots by
// batch), rather than refusing them and leaving the VIPs on the failsafe.
func TestResumesPinsOfAnUnmappedSlotMap(t *testing.T) {
	dir := bpftest.BPFFS(t) + "/setpoint"
	old, servers := setup(t, 2, Options{Groups: 2, Slots: 65537, PinDir: dir, unmapped: true})
	if _, err := old.Publish(0, table([]int{0, 65537}), ids(2)); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := Load(Options{Groups: 2, Slots: 65537, PinDir: dir})
	if err != nil {
		t.Fatalf("loading over the older pins: %v", err)
	}
	defer d.Close()
	if d.slots != nil {
		t.Fatal("the resumed slot map is mapped: it was pinned unmapped")
	}
	if resumed, err := d.Attach("/nonexistent: the pinned link is used"); err != nil || !resumed {
		t.Fatalf("resume: %v, %v", resumed, err)
	}
	if act, err := d.Active(0); err != nil || len(act) != 65537 || act[0] != 1 {
		t.Fatalf("the resumed table: %d slots, %v", len(act), err)
	}
	want := table([]int{65537, 0})
	if _, err := d.Publish(0, want, ids(2)); err != nil {
		t.Fatal(err)
	}
	if act, err := d.Active(0); err != nil || !slices.Equal(act, want) {
		t.Fatalf("published by batch, the active table differs (%v)", err)
	}
	if got, _ := storm(t, 10, servers); got[0] != 10 {
		t.Fatalf("after a publish on the resumed pins: %v, want all to backend 0", got)
	}
	if err := d.Cleanup(); err != nil {
		t.Fatal(err)
	}
}
