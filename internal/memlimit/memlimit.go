// Package memlimit sets the Go runtime's soft memory limit from the memory
// limit of the cgroup the process runs in (v1 or v2), as Prometheus 3
// does: without it, the heap grows to twice what is live before a
// collection, and a container limited to 512Mi is killed by the kernel
// while half of what it holds is garbage.
package memlimit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultRatio of the cgroup's limit is given to the Go heap: the rest is
// the runtime's own, stacks, and memory outside the Go heap.
const DefaultRatio = 0.9

// unlimited is where a v1 limit means none (the kernel's page-rounded
// maximum int64).
const unlimited = 1 << 62

// Limit reads the memory limit of the process's cgroup from root (the
// filesystem at /, e.g. os.DirFS("/")): the smallest limit on the path from
// the process's cgroup to the hierarchy's root, as the kernel enforces
// every ancestor's. ok is false when there is none.
func Limit(root fs.FS) (limit int64, ok bool, err error) {
	b, err := fs.ReadFile(root, "proc/self/cgroup")
	if err != nil {
		return 0, false, fmt.Errorf("reading /proc/self/cgroup: %w", err)
	}
	v1, v2 := "", ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = parts[2]
		case controllerListHas(parts[1], "memory"):
			v1 = parts[2]
		}
	}
	var files []string
	switch {
	case v1 != "":
		files = candidates("sys/fs/cgroup/memory", v1, "memory.limit_in_bytes")
	case v2 != "":
		files = candidates("sys/fs/cgroup", v2, "memory.max")
	default:
		return 0, false, nil
	}
	limit = math.MaxInt64
	for _, f := range files {
		raw, err := fs.ReadFile(root, f)
		if errors.Is(err, fs.ErrNotExist) {
			// A cgroup namespace shows the process's own cgroup as the
			// mount's root: the full path is not there.
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("reading /%s: %w", f, err)
		}
		s := strings.TrimSpace(string(raw))
		if s == "max" {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return 0, false, fmt.Errorf("/%s: %q is not a memory limit", f, s)
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

func controllerListHas(list, c string) bool {
	for x := range strings.SplitSeq(list, ",") {
		if x == c {
			return true
		}
	}
	return false
}

// candidates lists file in the cgroup at p under mount and in each of its
// ancestors up to the mount itself.
func candidates(mount, p, file string) []string {
	p = path.Clean("/" + p)
	var out []string
	for {
		out = append(out, path.Join(mount, p, file))
		if p == "/" {
			return out
		}
		p = path.Dir(p)
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
