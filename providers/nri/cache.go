package nri

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/setpoint-dev/setpoint/engine/decide/nodepolicy"
	"github.com/setpoint-dev/setpoint/engine/gate"
	"github.com/setpoint-dev/setpoint/internal/atomicfile"
	"github.com/setpoint-dev/setpoint/providers/noderes"
)

// cacheVersion is the cache file's format.
const cacheVersion = 1

// Bounds on what the runtime and the engine can make the cache hold: a
// node runs a few hundred containers; these are far past any node.
const (
	maxPods       = 4096
	maxContainers = 16384
	maxMemoryObjs = 4096
	maxCacheBytes = 64 << 20
)

// Pod is what the cache keeps of a pod sandbox.
type Pod struct {
	ID        string            `json:"id"`
	UID       string            `json:"uid"`
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	Workload  string            `json:"workload,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// Ctr is a container in the cache.
type Ctr struct {
	nodepolicy.Container
	// OrigLimit is the memory limit the container was created with,
	// restored when setpoint lets go of it (0: none).
	OrigLimit int64 `json:"origLimit,omitempty"`
	// Cgroup is the container's cgroups path, as the runtime gave it:
	// where its working set is read.
	Cgroup string `json:"cgroup,omitempty"`
}

// Owned is what setpoint set on a container and the runtime has: a
// dimension setpoint never set is empty and stays the runtime's.
type Owned struct {
	CPUs  string `json:"cpus,omitempty"`
	Mems  string `json:"mems,omitempty"`
	Limit int64  `json:"limit,omitempty"`
}

// PolicyState is the NodePolicy the node runs.
type PolicyState struct {
	Address string         `json:"address"`
	Config  noderes.Config `json:"config"`
	// Manager is the field manager the policy was applied as: Read reports
	// it, the ownership mark that lets the engine recognise a policy it
	// created (an apply cut off before it was recorded) instead of
	// adopting it.
	Manager string `json:"manager,omitempty"`
}

// defaultManager marks what the agent holds when no manager was kept (a
// cache of an earlier release): only setpoint gives the agent policies
// and limits.
const defaultManager = gate.SetpointManager

func managerOr(m string) string {
	if m == "" {
		return defaultManager
	}
	return m
}

// Cache is the pipeline's state, persisted so a restarted agent
// re-derives the same assignments: pods, containers in the order they
// came, what setpoint set on each, the pools' CPUs, the policy and the
// NFR memory limits.
type Cache struct {
	Version  int                          `json:"version"`
	Topology nodepolicy.Topology          `json:"topology"`
	Pods     map[string]Pod               `json:"pods"`
	Ctrs     map[string]Ctr               `json:"containers"`
	Owned    map[string]Owned             `json:"owned"`
	Pools    map[string]nodepolicy.CPUSet `json:"pools"`
	Policy   *PolicyState                 `json:"policy,omitempty"`
	Memory   map[string]map[string]int64  `json:"memory"` // workload "ns/name" → container → bytes
	Seq      uint64                       `json:"seq"`
}

func newCache(t nodepolicy.Topology) *Cache {
	return &Cache{Version: cacheVersion, Topology: t, Pods: map[string]Pod{}, Ctrs: map[string]Ctr{},
		Owned: map[string]Owned{}, Pools: map[string]nodepolicy.CPUSet{}, Memory: map[string]map[string]int64{}}
}

// loadCache reads a cache file; a missing file is an empty cache. A cache
// of another topology (the node changed) keeps its policy and memory
// limits and forgets its pools.
func loadCache(path string, t nodepolicy.Topology) (*Cache, error) {
	c := newCache(t)
	if path == "" {
		return c, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the node cache: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxCacheBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the node cache %s: %w", path, err)
	}
	if len(raw) > maxCacheBytes {
		return nil, fmt.Errorf("the node cache %s is over %d MiB: not a cache this agent wrote", path, maxCacheBytes>>20)
	}
	var got Cache
	if err := json.Unmarshal(raw, &got); err != nil {
		return nil, fmt.Errorf("the node cache %s: %w (move it aside to start afresh)", path, err)
	}
	if got.Version != cacheVersion {
		return nil, fmt.Errorf("the node cache %s is format %d, this agent reads %d", path, got.Version, cacheVersion)
	}
	if len(got.Pods) > maxPods || len(got.Ctrs) > maxContainers || len(got.Memory) > maxMemoryObjs {
		return nil, fmt.Errorf("the node cache %s holds more than this agent ever keeps", path)
	}
	if got.Topology != t {
		got.Pools = nil
		got.Topology = t
	}
	fresh := newCache(t)
	if got.Pods == nil {
		got.Pods = fresh.Pods
	}
	if got.Ctrs == nil {
		got.Ctrs = fresh.Ctrs
	}
	if got.Owned == nil {
		got.Owned = fresh.Owned
	}
	if got.Pools == nil {
		got.Pools = fresh.Pools
	}
	if got.Memory == nil {
		got.Memory = fresh.Memory
	}
	if got.Policy != nil {
		if err := got.Policy.Config.Check(); err != nil {
			return nil, fmt.Errorf("the node cache %s: its policy: %w", path, err)
		}
	}
	return &got, nil
}

func (c *Cache) encode() ([]byte, error) { return json.Marshal(c) }

func saveCache(path string, raw []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("saving the node cache: %w", err)
	}
	if err := atomicfile.Write(path, raw, 0o600); err != nil {
		return fmt.Errorf("saving the node cache: %w", err)
	}
	return nil
}
