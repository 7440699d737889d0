//go:build linux

// Package dataplane loads the RouteGroup connect4 program, attaches it to
// a cgroup, and writes its maps: VIPs, backends, A/B slot tables with the
// epoch flip, admission, the heartbeat the failsafe watches, and the
// counters it keeps. It knows nothing of pressure or weights: the eBPF
// provider decides, this package projects.
package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// MaxBackends is the most backends (ids) a group has.
const MaxBackends = 1024

// MaxGroups bounds the groups one dataplane serves.
const MaxGroups = 256

// Protocols a VIP is matched on.
const (
	TCP = unix.IPPROTO_TCP
	UDP = unix.IPPROTO_UDP
)

// Options size the maps and say where they are pinned.
type Options struct {
	// Groups is how many route groups the maps hold.
	Groups int
	// Slots is the largest table a group may publish.
	Slots int
	// PinDir, when set, pins the maps and the link in bpffs there, so the
	// program stays attached, with its tables, across the agent's crash
	// and a restarted agent resumes with them.
	PinDir string
	// unmapped loads the slot map as agents before the mapped one did
	// (tests make such pins).
	unmapped bool
}

// Dataplane is a loaded program and its maps.
type Dataplane struct {
	opts Options
	objs connect4Objects
	link link.Link
	// lock holds the pin directory: one process at a time owns what is
	// pinned there (an agent, or a cleanup).
	lock *os.File
	mu   sync.Mutex
	// rcu is a map of maps the program never reads: writing it makes the
	// kernel wait out every BPF program running (synchronize_rcu), the
	// barrier after a flip (see Publish). Guarded by rcuMu (with
	// rcuClosed), not mu: a wait of ~10 ms must not hold up another
	// group's copy.
	rcuMu         sync.Mutex
	rcu, rcuInner *ebpf.Map
	rcuClosed     bool
	// slots is the slot map's memory (mapped: a side is one copy; nil
	// for a map resumed from older pins), and sideBuf a side's bytes as
	// written there (guarded by mu, as closed is).
	slots   *ebpf.Memory
	sideBuf []byte
	closed  bool
	// quiet is closed when the connects that may still read the side
	// the last flip left are over (nil: no flip waits); quietErr says
	// why that wait failed. Guarded by qmu.
	qmu      sync.Mutex
	quiet    chan struct{}
	quietErr error
}

// Load loads the program and its maps (reusing pinned ones under
// opts.PinDir). It needs root (CAP_BPF, CAP_NET_ADMIN) and BTF.
func Load(opts Options) (*Dataplane, error) {
	if opts.Groups < 1 || opts.Groups > MaxGroups {
		return nil, fmt.Errorf("dataplane for %d groups: want 1..%d", opts.Groups, MaxGroups)
	}
	if opts.Slots < 1 || opts.Slots > 131071 {
		return nil, fmt.Errorf("dataplane tables of %d slots: want 1..131071", opts.Slots)
	}
	spec, err := loadConnect4()
	if err != nil {
		return nil, fmt.Errorf("reading the connect4 object: %w", err)
	}
	g := uint32(opts.Groups)
	sizes := map[string]uint32{
		"epochs": g, "controls": g, "heartbeats": g, "buckets": g, "group_stats": g,
		"sides": 2 * g, "slots": 2 * g * uint32(opts.Slots), "evens": 2 * g * MaxBackends,
		"backends": g * MaxBackends, "counters": g * MaxBackends,
	}
	for name, n := range sizes {
		spec.Maps[name].MaxEntries = n
	}
	// The slots are written a side at a time: mapped, that is one copy
	// (a batch update of 65,537 elements took ~20 ms).
	if !opts.unmapped {
		spec.Maps["slots"].Flags |= unix.BPF_F_MMAPABLE
	}
	if err := spec.Variables["slot_stride"].Set(uint32(opts.Slots)); err != nil {
		return nil, fmt.Errorf("setting the slot stride: %w", err)
	}
	if err := spec.Variables["max_groups"].Set(g); err != nil {
		return nil, fmt.Errorf("setting the group count: %w", err)
	}
	var copts ebpf.CollectionOptions
	d := &Dataplane{opts: opts}
	if opts.PinDir != "" {
		if err := os.MkdirAll(opts.PinDir, 0o700); err != nil {
			return nil, fmt.Errorf("making the pin directory: %w", err)
		}
		lock, err := lockDir(opts.PinDir)
		if err != nil {
			return nil, err
		}
		d.lock = lock
		copts.Maps.PinPath = opts.PinDir
	} else {
		for _, m := range spec.Maps {
			m.Pinning = ebpf.PinNone
		}
	}
	err = spec.LoadAndAssign(&d.objs, &copts)
	if errors.Is(err, ebpf.ErrMapIncompatible) && opts.PinDir != "" && !opts.unmapped {
		// Pins an agent before the mapped slot map left (a rolling
		// update over a live dataplane): resume them as they are, and
		// write the slots by batch (a cleanup, or a new node, maps them).
		spec.Maps["slots"].Flags &^= unix.BPF_F_MMAPABLE
		err = spec.LoadAndAssign(&d.objs, &copts)
	}
	if err != nil {
		d.unlock()
		if errors.Is(err, ebpf.ErrMapIncompatible) {
			return nil, fmt.Errorf("loading the connect4 program: the maps pinned in %s were sized for another configuration (run the provider's cleanup): %w", opts.PinDir, err)
		}
		return nil, fmt.Errorf("loading the connect4 program (root with BPF and BTF needed): %w", err)
	}
	if d.objs.Slots.Flags()&unix.BPF_F_MMAPABLE == 0 {
		return d, nil // written by batch (writeSide)
	}
	if d.slots, err = d.objs.Slots.Memory(); err != nil {
		d.Close()
		return nil, fmt.Errorf("mapping the slot table: %w", err)
	}
	if want := uint64(sizes["slots"]) * slotBytes; uint64(d.slots.Size()) < want {
		d.Close()
		return nil, fmt.Errorf("the slot table's memory is %d bytes, want at least %d (%d-byte elements)", d.slots.Size(), want, slotBytes)
	}
	return d, nil
}

// lockDir takes the pin directory's lock without waiting: two agents on
// one pinned dataplane would write each other's tables, and a cleanup
// under a running agent would detach it.
func lockDir(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("opening the pin directory: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s (another agent on this node, or a cleanup, is using it)", ErrPinDirBusy, dir)
		}
		return nil, fmt.Errorf("locking the pin directory %s: %w", dir, err)
	}
	return f, nil
}

// ErrPinDirBusy is a pin directory another process holds.
var ErrPinDirBusy = errors.New("the pin directory is in use")

func (d *Dataplane) unlock() {
	if d.lock != nil {
		d.lock.Close()
		d.lock = nil
	}
}

func (d *Dataplane) linkPin() string { return filepath.Join(d.opts.PinDir, "link") }

// Attach attaches the program to the cgroup at path. With a pin directory
// a link pinned by an earlier agent is taken over and given this
// program: the VIPs stay rewritten throughout. It says whether it resumed.
func (d *Dataplane) Attach(cgroup string) (resumed bool, err error) {
	if d.opts.PinDir != "" {
		if l, err := link.LoadPinnedLink(d.linkPin(), nil); err == nil {
			if err := l.Update(d.objs.Connect4); err != nil {
				l.Close()
				return false, fmt.Errorf("updating the pinned link's program: %w", err)
			}
			d.link = l
			return true, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return false, fmt.Errorf("loading the pinned link: %w", err)
		}
	}
	l, err := link.AttachCgroup(link.CgroupOptions{Path: cgroup, Attach: ebpf.AttachCGroupInet4Connect, Program: d.objs.Connect4})
	if err != nil {
		return false, fmt.Errorf("attaching connect4 to cgroup %s: %w", cgroup, err)
	}
	if d.opts.PinDir != "" {
		if err := l.Pin(d.linkPin()); err != nil {
			l.Close()
			return false, fmt.Errorf("pinning the link: %w", err)
		}
	}
	d.link = l
	return false, nil
}

// Close releases this process's hold on the program and maps. A pinned
// link stays attached (the failsafe takes over when the heartbeat
// stops); an unpinned one detaches.
func (d *Dataplane) Close() error {
	// The wait after the last flip uses the barrier maps closed below.
	_ = d.waitQuiet()
	var errs []error
	d.rcuMu.Lock()
	d.rcuClosed = true
	if d.rcu != nil {
		errs = append(errs, d.rcu.Close(), d.rcuInner.Close())
		d.rcu, d.rcuInner = nil, nil
	}
	d.rcuMu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	if d.link != nil {
		errs = append(errs, d.link.Close())
	}
	errs = append(errs, d.objs.Close())
	d.unlock()
	return errors.Join(errs...)
}

// Cleanup detaches the program and removes every pin: the only way a
// pinned dataplane goes away.
func (d *Dataplane) Cleanup() error {
	var errs []error
	if d.link != nil {
		errs = append(errs, d.link.Unpin())
	}
	for _, m := range []*ebpf.Map{d.objs.Vips, d.objs.Epochs, d.objs.Sides, d.objs.Slots, d.objs.Evens, d.objs.Backends,
		d.objs.Counters, d.objs.Controls, d.objs.Heartbeats, d.objs.Buckets, d.objs.GroupStats} {
		if m.IsPinned() {
			errs = append(errs, m.Unpin())
		}
	}
	if d.opts.PinDir != "" {
		// Removed while the lock is held: an agent starting now makes a
		// new directory rather than pinning into one going away.
		errs = append(errs, os.Remove(d.opts.PinDir))
	}
	errs = append(errs, d.Close())
	return errors.Join(errs...)
}

func (d *Dataplane) group(g uint32) error {
	if int(g) >= d.opts.Groups {
		return fmt.Errorf("group %d: the dataplane holds %d", g, d.opts.Groups)
	}
	return nil
}

// be32 is an address as the program compares it: network byte order
// read as a host (little-endian) u32.
func be32(a netip.Addr) uint32 { b := a.As4(); return binary.LittleEndian.Uint32(b[:]) }

// port16 is a port as the program's user_port holds it.
func port16(p uint16) uint32 { return uint32(p>>8 | p<<8) }

// SetVIP routes connects to vip (IPv4) over proto through group g.
func (d *Dataplane) SetVIP(g uint32, vip netip.AddrPort, proto uint32) error {
	if err := d.group(g); err != nil {
		return err
	}
	if !vip.Addr().Is4() {
		return fmt.Errorf("VIP %s: IPv4 only", vip)
	}
	k := connect4VipKey{Ip: be32(vip.Addr()), Port: port16(vip.Port()), Proto: proto}
	return d.objs.Vips.Put(&k, &g)
}

// RemoveVIP stops rewriting vip.
func (d *Dataplane) RemoveVIP(vip netip.AddrPort, proto uint32) error {
	k := connect4VipKey{Ip: be32(vip.Addr()), Port: port16(vip.Port()), Proto: proto}
	if err := d.objs.Vips.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return err
	}
	return nil
}

// VIP is a routed address and its protocol (TCP or UDP).
type VIP struct {
	Addr  netip.AddrPort
	Proto uint32
}

// VIPs lists the VIPs and their groups (a resumed agent's starting point).
func (d *Dataplane) VIPs() (map[VIP]uint32, error) {
	out := map[VIP]uint32{}
	var k connect4VipKey
	var g uint32
	it := d.objs.Vips.Iterate()
	for it.Next(&k, &g) {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], k.Ip)
		out[VIP{netip.AddrPortFrom(netip.AddrFrom4(b), uint16(port16(uint16(k.Port)))), k.Proto}] = g
	}
	return out, it.Err()
}

// SetBackend names backend id of group g; a zero address clears it.
func (d *Dataplane) SetBackend(g, id uint32, addr netip.AddrPort) error {
	if err := d.group(g); err != nil {
		return err
	}
	if id >= MaxBackends {
		return fmt.Errorf("backend id %d: at most %d", id, MaxBackends-1)
	}
	var b connect4Backend
	if addr.IsValid() {
		if !addr.Addr().Is4() || addr.Port() == 0 {
			return fmt.Errorf("backend %s: IPv4 with a port only", addr)
		}
		b = connect4Backend{Ip: be32(addr.Addr()), Port: port16(addr.Port())}
	}
	// A connect on the side the last flip left may still read this id.
	if err := d.waitQuiet(); err != nil {
		return fmt.Errorf("waiting for the connects on the old table: %w", err)
	}
	k := g*MaxBackends + id
	return d.objs.Backends.Put(&k, &b)
}

// Backends reads group g's backends by id.
func (d *Dataplane) Backends(g uint32) (map[uint32]netip.AddrPort, error) {
	if err := d.group(g); err != nil {
		return nil, err
	}
	out := map[uint32]netip.AddrPort{}
	for id := range uint32(MaxBackends) {
		k := g*MaxBackends + id
		var b connect4Backend
		if err := d.objs.Backends.Lookup(&k, &b); err != nil {
			return nil, err
		}
		if b.Port != 0 {
			var ip [4]byte
			binary.LittleEndian.PutUint32(ip[:], b.Ip)
			out[id] = netip.AddrPortFrom(netip.AddrFrom4(ip), uint16(port16(uint16(b.Port))))
		}
	}
	return out, nil
}

// Publish writes table (backend ids by slot) and the failsafe's healthy
// ids into group g's inactive side, then flips the epoch to it. The
// flip is one map write: a connect reads one side or the other, whole.
// It says when the flip began and how long it took.
func (d *Dataplane) Publish(g uint32, table, healthy []uint32) (Flip, error) {
	if err := d.group(g); err != nil {
		return Flip{}, err
	}
	if len(table) == 0 || len(table) > d.opts.Slots {
		return Flip{}, fmt.Errorf("table of %d slots: want 1..%d", len(table), d.opts.Slots)
	}
	if len(healthy) > MaxBackends {
		return Flip{}, fmt.Errorf("%d healthy backends: at most %d", len(healthy), MaxBackends)
	}
	for _, id := range table {
		if id >= MaxBackends {
			return Flip{}, fmt.Errorf("slot owner %d: ids stop at %d", id, MaxBackends-1)
		}
	}
	// The side about to be written was active before the last flip:
	// connects that read it then must be over first.
	if err := d.waitQuiet(); err != nil {
		return Flip{}, fmt.Errorf("waiting for the connects on the old table: %w", err)
	}
	epoch, err := d.Epoch(g)
	if err != nil {
		return Flip{}, err
	}
	si := g*2 + (epoch+1)&1
	if err := d.writeSide(si, table); err != nil {
		return Flip{}, fmt.Errorf("writing the slot table: %w", err)
	}
	if len(healthy) > 0 {
		ek := make([]uint32, len(healthy))
		for i := range ek {
			ek[i] = si*MaxBackends + uint32(i)
		}
		if _, err := d.objs.Evens.BatchUpdate(ek, healthy, nil); err != nil {
			return Flip{}, fmt.Errorf("writing the failsafe list: %w", err)
		}
	}
	side := connect4Side{Size: uint32(len(table)), Healthy: uint32(len(healthy))}
	if err := d.objs.Sides.Put(&si, &side); err != nil {
		return Flip{}, fmt.Errorf("writing the side's sizes: %w", err)
	}
	start := time.Now()
	next := epoch + 1
	if err := d.objs.Epochs.Put(&g, &next); err != nil {
		return Flip{}, fmt.Errorf("flipping the epoch: %w", err)
	}
	took := time.Since(start)
	// A connect that read the old epoch may still be reading the old side
	// and the backends it names: until it is done, that side must not be
	// written (the next publish writes it) nor its backends changed (the
	// caller frees the ids it no longer names). The wait for every
	// program running to finish runs now, off the publish; whatever
	// writes there waits for it first (waitQuiet).
	d.startQuiet()
	return Flip{At: start, Took: took, Epoch: next}, nil
}

// slotBytes is an element's stride in the slot map's memory: an array
// map lays each value out rounded up to 8 bytes.
const slotBytes = 8

// slotKey is slot i of side si's index in the slot map (as the program
// reads it: side × slot_stride + slot).
func (d *Dataplane) slotKey(si uint32, i int) uint32 {
	return si*uint32(d.opts.Slots) + uint32(i)
}

// writeSide copies table into side si of the mapped slot map (or writes
// it by batch into an unmapped one, resumed from older pins).
func (d *Dataplane) writeSide(si uint32, table []uint32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errClosed
	}
	if d.slots == nil {
		keys := make([]uint32, len(table))
		for i := range keys {
			keys[i] = d.slotKey(si, i)
		}
		_, err := d.objs.Slots.BatchUpdate(keys, table, nil)
		return err
	}
	n := slotBytes * len(table)
	if cap(d.sideBuf) < n {
		d.sideBuf = make([]byte, slotBytes*d.opts.Slots)
	}
	buf := d.sideBuf[:n]
	for i, id := range table {
		binary.NativeEndian.PutUint32(buf[slotBytes*i:], id)
	}
	_, err := d.slots.WriteAt(buf, slotBytes*int64(d.slotKey(si, 0)))
	// The copy is plain stores to shared memory; the flip that publishes
	// it is a store by the kernel in another call. A full barrier between
	// them keeps a weakly ordered CPU (arm64) from letting a connect see
	// the new epoch before the side's slots.
	fence.Add(1)
	return err
}

// fence is what writeSide's barrier operates on (an atomic read-modify-
// write is a full barrier on every Go platform).
var fence atomic.Uint64

// errClosed is a call on a closed dataplane.
var errClosed = errors.New("the dataplane is closed")

// startQuiet starts waiting out the programs running now (after a flip).
// Its wait covers every flip before it, so one pending wait is enough.
func (d *Dataplane) startQuiet() {
	done := make(chan struct{})
	d.qmu.Lock()
	d.quiet = done
	d.qmu.Unlock()
	go func() {
		err := d.quiesce()
		d.qmu.Lock()
		if d.quiet == done {
			d.quietErr = err
		}
		d.qmu.Unlock()
		close(done)
	}()
}

// waitQuiet returns once the connects that read a side before the last
// flip are over (at once when they already are).
func (d *Dataplane) waitQuiet() error {
	d.qmu.Lock()
	done := d.quiet
	d.qmu.Unlock()
	if done == nil {
		return nil
	}
	<-done
	d.qmu.Lock()
	failed := d.quietErr != nil || d.quiet != done
	d.qmu.Unlock()
	if failed {
		// The wait failed, or a later one replaced it (its error is its
		// own): wait here, now, which covers every flip before.
		if err := d.quiesce(); err != nil {
			return err
		}
	}
	d.qmu.Lock()
	if d.quiet == done {
		d.quiet, d.quietErr = nil, nil
	}
	d.qmu.Unlock()
	return nil
}

// quiesce returns once every BPF program running when it was called has
// finished: the kernel waits for that (synchronize_rcu) before a write to a
// map of maps returns, so connects on the old side are over.
func (d *Dataplane) quiesce() error {
	d.rcuMu.Lock()
	defer d.rcuMu.Unlock()
	if d.rcuClosed {
		return errClosed
	}
	if d.rcu == nil {
		inner := &ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1}
		in, err := ebpf.NewMap(inner)
		if err != nil {
			return err
		}
		out, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.ArrayOfMaps, KeySize: 4, ValueSize: 4, MaxEntries: 1, InnerMap: inner})
		if err != nil {
			in.Close()
			return err
		}
		d.rcu, d.rcuInner = out, in
	}
	return d.rcu.Put(uint32(0), d.rcuInner)
}

// Flip is when a publish flipped its group's epoch, and in how long.
type Flip struct {
	At    time.Time
	Took  time.Duration
	Epoch uint32
}

// Epoch is group g's current epoch (its active side is epoch & 1).
func (d *Dataplane) Epoch(g uint32) (uint32, error) {
	var e uint32
	if err := d.objs.Epochs.Lookup(&g, &e); err != nil {
		return 0, fmt.Errorf("reading the epoch: %w", err)
	}
	return e, nil
}

// Active reads group g's active table (nil before the first publish).
func (d *Dataplane) Active(g uint32) ([]uint32, error) {
	epoch, err := d.Epoch(g)
	if err != nil {
		return nil, err
	}
	si := g*2 + epoch&1
	var side connect4Side
	if err := d.objs.Sides.Lookup(&si, &side); err != nil {
		return nil, err
	}
	if side.Size == 0 {
		return nil, nil
	}
	out := make([]uint32, side.Size)
	if d.slots == nil {
		for i := range out {
			k := d.slotKey(si, i)
			if err := d.objs.Slots.Lookup(&k, &out[i]); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	buf := make([]byte, slotBytes*int(side.Size))
	if _, err := d.slots.ReadAt(buf, slotBytes*int64(d.slotKey(si, 0))); err != nil {
		return nil, err
	}
	for i := range out {
		out[i] = binary.NativeEndian.Uint32(buf[slotBytes*i:])
	}
	return out, nil
}

// Admission modes, as the program reads them.
const (
	AdmitNormal = 0
	AdmitSoft   = 1
	AdmitHard   = 2
)

// Control is a group's admission and failsafe threshold.
type Control struct {
	Mode int
	// Shed is the fraction refused in soft mode.
	Shed float64
	// Budget is connects per second admitted in hard mode, Burst the most
	// admitted at once.
	Budget float64
	Burst  int
	// Failsafe is how old the heartbeat may get before connects split
	// evenly over the healthy backends.
	Failsafe time.Duration
}

// The token bucket counts in 1e12ths of a connect in a u64 (about 1.8e7
// connects): a burst of at most 1e6 keeps the bucket, and a refill of
// budget × 1000 units a nanosecond, far from overflow.
const (
	MaxBurst  = 1_000_000
	MaxBudget = 10_000_000 // connects per second
)

// SetControl writes group g's admission and failsafe threshold.
func (d *Dataplane) SetControl(g uint32, c Control) error {
	if err := d.group(g); err != nil {
		return err
	}
	if !(c.Shed >= 0 && c.Shed <= 1) || !(c.Budget >= 0 && c.Budget <= MaxBudget) || c.Burst < 0 || c.Burst > MaxBurst || c.Failsafe <= 0 {
		return fmt.Errorf("control %+v: shed 0..1, budget 0..%d/s, burst 0..%d, a failsafe threshold", c, MaxBudget, MaxBurst)
	}
	burst := c.Burst
	if burst == 0 {
		burst = min(max(1, int(c.Budget)), MaxBurst)
	}
	v := connect4Control{Mode: uint32(c.Mode), ShedPpm: uint32(c.Shed * 1e6), RateMilli: uint64(c.Budget * 1000),
		Burst: uint64(burst), FailsafeNs: uint64(c.Failsafe)}
	if err := d.objs.Controls.Put(&g, &v); err != nil {
		return err
	}
	// A new admission starts with a full bucket (the program fills one
	// whose last refill is 0): a hard episode begins with its burst, not
	// with what the last one left, which on the coarse clock refused
	// every connect until the next jiffy.
	return d.objs.Buckets.Put(&g, &connect4Bucket{})
}

// Monotonic is the clock the program's bpf_ktime_get_coarse_ns reads.
func Monotonic() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC_COARSE, &ts)
	return uint64(ts.Nano())
}

// Heartbeat tells the program the agent is alive as of now (monotonic ns).
func (d *Dataplane) Heartbeat(g uint32, now uint64) error {
	if err := d.group(g); err != nil {
		return err
	}
	return d.objs.Heartbeats.Put(&g, &now)
}

// Counters sums group g's per-CPU connect counters for ids.
func (d *Dataplane) Counters(g uint32, ids []uint32) ([]uint64, error) {
	if err := d.group(g); err != nil {
		return nil, err
	}
	out := make([]uint64, len(ids))
	var per []uint64
	for i, id := range ids {
		k := g*MaxBackends + id
		if err := d.objs.Counters.Lookup(&k, &per); err != nil {
			return nil, fmt.Errorf("reading counter %d: %w", id, err)
		}
		for _, v := range per {
			out[i] += v
		}
	}
	return out, nil
}

// Stats is what happened to a group's connects, summed over CPUs.
type Stats struct {
	Routed, Shed, Refused, Failsafe, Missed uint64
}

var allIDs = func() []uint32 {
	out := make([]uint32, MaxBackends)
	for i := range out {
		out[i] = uint32(i)
	}
	return out
}()

// Stats reads group g's totals (routed: every backend's counter, the
// failsafe's connects included).
func (d *Dataplane) Stats(g uint32) (Stats, error) {
	if err := d.group(g); err != nil {
		return Stats{}, err
	}
	s, err := groupStats(d.objs.GroupStats, g)
	if err != nil {
		return Stats{}, err
	}
	all, err := d.Counters(g, allIDs)
	if err != nil {
		return Stats{}, err
	}
	for _, n := range all {
		s.Routed += n
	}
	return s, nil
}

// groupStats sums group g's per-CPU entry of the group_stats map (Routed
// is the backends' counters, not in it).
func groupStats(m *ebpf.Map, g uint32) (Stats, error) {
	var per []connect4Stats
	if err := m.Lookup(&g, &per); err != nil {
		return Stats{}, err
	}
	var s Stats
	for _, p := range per {
		s.Shed += p.Shed
		s.Refused += p.Refused
		s.Failsafe += p.Failsafe
		s.Missed += p.Missed
	}
	return s, nil
}

// ClearGroup forgets group g's tables and backends so a new
// route group can take its index.
func (d *Dataplane) ClearGroup(g uint32) error {
	if err := d.group(g); err != nil {
		return err
	}
	// A VIP still pointing at g (left by an agent that crashed) must not
	// route into the tables the group's next user writes.
	vips, err := d.VIPs()
	if err != nil {
		return fmt.Errorf("listing VIPs: %w", err)
	}
	zero := uint64(0)
	var errs []error
	for v, vg := range vips {
		if vg == g {
			errs = append(errs, d.RemoveVIP(v.Addr, v.Proto))
		}
	}
	// A connect that found the VIP just before may still read the group's
	// sides and backends: it is over before they are cleared.
	errs = append(errs, d.quiesce())
	errs = append(errs, d.objs.Heartbeats.Put(&g, &zero))
	for side := range uint32(2) {
		si := g*2 + side
		errs = append(errs, d.objs.Sides.Put(&si, &connect4Side{}))
	}
	for id := range uint32(MaxBackends) {
		errs = append(errs, d.SetBackend(g, id, netip.AddrPort{}))
	}
	return errors.Join(errs...)
}
