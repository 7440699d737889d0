//go:build linux

package ebpf

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	cebpf "github.com/cilium/ebpf"

	"github.com/setpoint-dev/setpoint/engine/addrs"
)

// The owners map is pinned beside the dataplane's maps: by group index,
// the address of the config that group runs for. The kernel's tables say
// which VIPs a crashed agent routed, not for whom; with this a restarted
// agent can tell a resumed VIP whose config is gone, or names another VIP
// now, from one still asked for.
const (
	ownersPin = "owners"
	// ownerSize holds PROVIDER:RouteGroup/NAMESPACE/NAME with Kubernetes'
	// longest namespace (63) and name (253), and a provider's name.
	ownerSize = 512
)

// owners is the pinned owners map, or nil without a pin directory.
type owners struct{ m *cebpf.Map }

// openOwners opens the owners map pinned in dir, making it on first use.
// The caller holds the pin directory's lock (a loaded dataplane).
func openOwners(dir string, groups int) (*owners, error) {
	if dir == "" {
		return &owners{}, nil
	}
	m, err := cebpf.NewMapWithOptions(&cebpf.MapSpec{Name: ownersPin, Type: cebpf.Array, KeySize: 4, ValueSize: ownerSize,
		MaxEntries: uint32(groups), Pinning: cebpf.PinByName}, cebpf.MapOptions{PinPath: dir})
	if err != nil {
		if errors.Is(err, cebpf.ErrMapIncompatible) {
			return nil, fmt.Errorf("the owners map pinned in %s was sized for another configuration (run the provider's cleanup): %w", dir, err)
		}
		return nil, fmt.Errorf("opening the owners map pinned in %s: %w", dir, err)
	}
	return &owners{m: m}, nil
}

// set records a as the owner of group idx; the zero address clears it.
func (o *owners) set(idx uint32, a addrs.Object) error {
	if o == nil || o.m == nil {
		return nil
	}
	var v [ownerSize]byte
	if !a.IsZero() {
		s := a.String()
		if len(s) > ownerSize {
			return fmt.Errorf("recording group %d's owner: %s is longer than %d bytes", idx, s, ownerSize)
		}
		copy(v[:], s)
	}
	if err := o.m.Put(&idx, &v); err != nil {
		return fmt.Errorf("recording group %d's owner: %w", idx, err)
	}
	return nil
}

// get is group idx's owner; false when none is recorded (a pin directory
// an agent without this map made, or a group that was cleared).
func (o *owners) get(idx uint32) (addrs.Object, bool, error) {
	if o == nil || o.m == nil {
		return addrs.Object{}, false, nil
	}
	var v [ownerSize]byte
	if err := o.m.Lookup(&idx, &v); err != nil {
		return addrs.Object{}, false, fmt.Errorf("reading group %d's owner: %w", idx, err)
	}
	s := string(bytes.TrimRight(v[:], "\x00"))
	if s == "" {
		return addrs.Object{}, false, nil
	}
	a, err := addrs.ParseObject(s)
	if err != nil {
		return addrs.Object{}, false, fmt.Errorf("reading group %d's owner: %w", idx, err)
	}
	return a, true, nil
}

// close lets go of the map; its pin stays for the next agent.
func (o *owners) close() error {
	if o == nil || o.m == nil {
		return nil
	}
	err := o.m.Close()
	o.m = nil
	return err
}

// remove unpins and closes the map: the dataplane's cleanup removes the
// pin directory, which must be empty by then.
func (o *owners) remove() error {
	if o == nil || o.m == nil {
		return nil
	}
	return errors.Join(o.m.Unpin(), o.close())
}

// removeOwnersPin removes the owners map a crashed agent left in dir, if
// any, for a cleanup that holds the directory's lock.
func removeOwnersPin(dir string) error {
	if err := os.Remove(filepath.Join(dir, ownersPin)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the owners map pinned in %s: %w", dir, err)
	}
	return nil
}
