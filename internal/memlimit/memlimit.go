// Package memlimit sets the Go runtime's soft memory limit from the memory
// limit of the cgroup the process runs in (v1 or v2), as Prometheus 3
// does: without it, the heap grows to twice what is live before a
// collection, and a container limited to 512Mi is killed by the kernel
// while half of what it holds is garbage.
package memlimit

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/setpoint-dev/setpoint/internal/cgroupfs"
)

// DefaultRatio of the cgroup's limit is given to the Go heap: the rest is
// the runtime's own, stacks, and memory outside the Go heap.
const DefaultRatio = 0.9

// unlimited is where a v1 limit means none (the kernel's page-rounded
// maximum int64).
const unlimited = 1 << 62

// Limit reads the memory limit of the process's cgroup from root (the
// filesystem at /, e.g. os.DirFS("/")): the smallest limit on the path from
// the process's cgroup up to its hierarchy's mount, as the kernel enforces
// every ancestor's, on either cgroup version (a hybrid host has the memory
// controller on v1 and none on v2). ok is false when there is none, or no
// /proc to read it from.
func Limit(root fs.FS) (limit int64, ok bool, err error) {
	own, err := fs.ReadFile(root, "proc/self/cgroup")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading /proc/self/cgroup: %w", err)
	}
	mounts, err := fs.ReadFile(root, "proc/self/mountinfo")
	if err != nil {
		return 0, false, fmt.Errorf("reading /proc/self/mountinfo: %w", err)
	}
	m := cgroupfs.Find(string(own), string(mounts))
	files := append(candidates(m.V2, m.V2Mount, "memory.max"), candidates(m.V1, m.V1Mount, "memory.limit_in_bytes")...)
	limit = math.MaxInt64
	for _, f := range files {
		raw, err := fs.ReadFile(root, strings.TrimPrefix(f, "/"))
		if errors.Is(err, fs.ErrNotExist) {
			// No memory controller at this level of this version.
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("reading %s: %w", f, err)
		}
		s := strings.TrimSpace(string(raw))
		if s == "max" {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return 0, false, fmt.Errorf("%s: %q is not a memory limit", f, s)
		}
		if n < unlimited {
			limit = min(limit, n)
		}
	}
	if limit == math.MaxInt64 {
		return 0, false, nil
	}
	return limit, true, nil
}

// candidates lists file in the cgroup directory dir and in each of its
// ancestors up to the hierarchy's mount point.
func candidates(dir, mount, file string) []string {
	if dir == "" {
		return nil
	}
	var out []string
	for {
		out = append(out, path.Join(dir, file))
		if dir == mount || dir == "/" || !strings.HasPrefix(dir, mount) {
			return out
		}
		dir = path.Dir(dir)
	}
}

// Set gives the Go runtime a soft memory limit of ratio × the cgroup's
// limit, unless GOMEMLIMIT is set (the user's word wins) or there is no
// limit. It returns the limit set (0 for none) and why not.
func Set(root fs.FS, env func(string) string, ratio float64) (int64, string, error) {
	if env("GOMEMLIMIT") != "" {
		return 0, "GOMEMLIMIT is set", nil
	}
	if ratio <= 0 || ratio > 1 {
		return 0, "", fmt.Errorf("memory limit ratio %g: want more than 0 and at most 1", ratio)
	}
	limit, ok, err := Limit(root)
	if err != nil {
		return 0, "", err
	}
	if !ok {
		return 0, "no cgroup memory limit", nil
	}
	n := int64(float64(limit) * ratio)
	debug.SetMemoryLimit(n)
	return n, "", nil
}
