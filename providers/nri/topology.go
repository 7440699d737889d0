package nri

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/setpoint-dev/setpoint/engine/decide/nodepolicy"
)

// DetectTopology reads the node's topology from sysfs (dir is
// /sys/devices/system/cpu). The policy numbers CPUs sockets-then-threads
// (thread t of core c on socket s is t·S·C + s·C + c); a node numbered
// otherwise, or uneven, is refused rather than mis-pinned: give its
// topology in the config.
func DetectTopology(dir string) (nodepolicy.Topology, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "online"))
	if err != nil {
		return nodepolicy.Topology{}, fmt.Errorf("reading the node's CPUs: %w", err)
	}
	online, err := nodepolicy.ParseCPUSet(strings.TrimSpace(string(raw)))
	if err != nil {
		return nodepolicy.Topology{}, fmt.Errorf("the node's online CPUs: %w", err)
	}
	type place struct{ pkg, core int }
	at := map[int]place{}
	pkgs, cores := map[int]bool{}, map[place]int{}
	for _, c := range online {
		read := func(f string) (int, error) {
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("cpu%d/topology/%s", c, f)))
			if err != nil {
				return 0, err
			}
			return strconv.Atoi(strings.TrimSpace(string(b)))
		}
		pkg, err := read("physical_package_id")
		if err != nil {
			return nodepolicy.Topology{}, fmt.Errorf("CPU %d's socket: %w", c, err)
		}
		core, err := read("core_id")
		if err != nil {
			return nodepolicy.Topology{}, fmt.Errorf("CPU %d's core: %w", c, err)
		}
		pl := place{pkg, core}
		at[c] = pl
		pkgs[pkg] = true
		cores[pl]++
	}
	s := len(pkgs)
	threads := 0
	for _, n := range cores {
		threads = max(threads, n)
	}
	t := nodepolicy.Topology{Sockets: s, Cores: len(cores) / max(s, 1), Threads: threads}
	if err := t.Check(); err != nil || t.CPUs() != len(online) || online[0] != 0 || online[len(online)-1] != len(online)-1 {
		return nodepolicy.Topology{}, fmt.Errorf("this node's %d CPUs are not an even sockets×cores×threads from 0: give the topology in the config", len(online))
	}
	// Check the numbering: a core's threads are S·C apart, and a
	// socket's cores consecutive.
	sc := t.Sockets * t.Cores
	for c, pl := range at {
		core := c % sc
		if at[core] != pl || at[core/t.Cores*t.Cores].pkg != pl.pkg {
			return nodepolicy.Topology{}, fmt.Errorf("this node numbers its CPUs otherwise than sockets-then-threads (CPU %d): give the topology in the config", c)
		}
	}
	return t, nil
}
