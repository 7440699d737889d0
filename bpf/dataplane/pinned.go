package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/cilium/ebpf"
)

// Pinned is a read-only look at a dataplane another process pinned (an
// agent running, or gone and left on the failsafe): which group routes a
// VIP, the group's heartbeat and failsafe threshold, and what its connects
// met. It takes no lock and writes nothing, so it can look while the
// pins' owner runs.
type Pinned struct {
	vips, heartbeats, controls, stats *ebpf.Map
}

// OpenPinned opens the maps pinned in dir, read only.
func OpenPinned(dir string) (*Pinned, error) {
	p := &Pinned{}
	for _, m := range []struct {
		name string
		to   **ebpf.Map
	}{{"vips", &p.vips}, {"heartbeats", &p.heartbeats}, {"controls", &p.controls}, {"group_stats", &p.stats}} {
		var err error
		if *m.to, err = ebpf.LoadPinnedMap(filepath.Join(dir, m.name), &ebpf.LoadPinOptions{ReadOnly: true}); err != nil {
			p.Close()
			return nil, fmt.Errorf("opening the pinned map %s: %w", m.name, err)
		}
	}
	return p, nil
}

// Close lets the maps go (the pins stay).
func (p *Pinned) Close() error {
	var errs []error
	for _, m := range []*ebpf.Map{p.vips, p.heartbeats, p.controls, p.stats} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return errors.Join(errs...)
}

// Group is the group routing vip (ok false: none does).
func (p *Pinned) Group(vip netip.AddrPort, proto uint32) (g uint32, ok bool, err error) {
	k := connect4VipKey{Ip: be32(vip.Addr()), Port: port16(vip.Port()), Proto: proto}
	if err := p.vips.Lookup(&k, &g); errors.Is(err, ebpf.ErrKeyNotExist) {
		return 0, false, nil
	} else if err != nil {
		return 0, false, err
	}
	return g, true, nil
}

// Heartbeat is group g's last heartbeat (Monotonic's clock, 0 for none)
// and the age past which its connects go to the failsafe.
func (p *Pinned) Heartbeat(g uint32) (at uint64, failsafe time.Duration, err error) {
	if err := p.heartbeats.Lookup(&g, &at); err != nil {
		return 0, 0, err
	}
	var c connect4Control
	if err := p.controls.Lookup(&g, &c); err != nil {
		return 0, 0, err
	}
	return at, time.Duration(c.FailsafeNs), nil
}

// Stats is what group g's connects met besides routing (Routed is not
// read here: it is 0).
func (p *Pinned) Stats(g uint32) (Stats, error) { return groupStats(p.stats, g) }
