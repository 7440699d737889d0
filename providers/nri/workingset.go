package nri

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The memory floor of a container is its working set, as the kubelet
// counts it: memory in use less the inactive file cache the kernel can
// drop. The agent reads it from each container's memory cgroup, whose
// path the runtime gives with the container.

// DefaultCgroupRoot is where the cgroup file systems are mounted.
const DefaultCgroupRoot = "/sys/fs/cgroup"

// DefaultWorkingSetEvery is how often the agent reads working sets.
const DefaultWorkingSetEvery = 10 * time.Second

// maxCgroupPath bounds a cgroups path the runtime hands over.
const maxCgroupPath = 4096

// Cgroups reads containers' memory cgroups under a root: version 2's
// unified hierarchy when the root has one, else version 1's memory
// controller under root/memory.
type Cgroups struct {
	base string // the memory hierarchy's root directory
	v2   bool
}

// OpenCgroups finds the memory hierarchy under root.
func OpenCgroups(root string) (Cgroups, error) {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		return Cgroups{base: filepath.Clean(root), v2: true}, nil
	}
	mem := filepath.Join(root, "memory")
	if _, err := os.Stat(filepath.Join(mem, "memory.usage_in_bytes")); err == nil {
		return Cgroups{base: mem}, nil
	}
	return Cgroups{}, fmt.Errorf("no memory cgroup hierarchy under %s (neither version 2's cgroup.controllers nor version 1's memory/)", root)
}

// Dir is the directory of a container's cgroup from the path the runtime
// gives: a cgroupfs path ("/kubepods/burstable/pod…/ID") or a systemd one
// ("kubepods-burstable-pod….slice:cri-containerd:ID"). A path that would
// leave the hierarchy is refused.
func (c Cgroups) Dir(cgroupsPath string) (string, error) {
	if cgroupsPath == "" || len(cgroupsPath) > maxCgroupPath {
		return "", fmt.Errorf("cgroups path of %d bytes: want 1 to %d", len(cgroupsPath), maxCgroupPath)
	}
	rel := cgroupsPath
	if !strings.HasPrefix(cgroupsPath, "/") {
		parts := strings.Split(cgroupsPath, ":")
		if len(parts) != 3 {
			return "", fmt.Errorf("cgroups path %q: want /a/b or slice:prefix:name", cgroupsPath)
		}
		slice, err := expandSlice(parts[0])
		if err != nil {
			return "", err
		}
		scope := parts[2] + ".scope"
		if parts[1] != "" {
			scope = parts[1] + "-" + scope
		}
		rel = slice + "/" + scope
	}
	for _, el := range strings.Split(rel, "/") {
		if el == ".." {
			return "", fmt.Errorf("cgroups path %q leaves the hierarchy", cgroupsPath)
		}
	}
	dir := filepath.Join(c.base, rel)
	if dir != c.base && !strings.HasPrefix(dir, c.base+string(filepath.Separator)) {
		return "", fmt.Errorf("cgroups path %q leaves the hierarchy", cgroupsPath)
	}
	return dir, nil
}

// expandSlice is systemd's path of a slice: a-b-c.slice lives in
// a.slice/a-b.slice/a-b-c.slice.
func expandSlice(s string) (string, error) {
	if s == "-.slice" { // the root slice
		return "", nil
	}
	name, ok := strings.CutSuffix(s, ".slice")
	if !ok || name == "" || strings.ContainsAny(name, "/.") || strings.HasPrefix(name, "-") || strings.HasSuffix(name, "-") || strings.Contains(name, "--") {
		return "", fmt.Errorf("systemd slice %q: want name.slice, its parts joined by single dashes", s)
	}
	var b strings.Builder
	parts := strings.Split(name, "-")
	for i := range parts {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(strings.Join(parts[:i+1], "-"))
		b.WriteString(".slice")
	}
	return b.String(), nil
}

// WorkingSet is a cgroup's memory in use less its inactive file cache
// (never below 0), in bytes.
func (c Cgroups) WorkingSet(dir string) (int64, error) {
	usageFile, inactiveKey := "memory.usage_in_bytes", "total_inactive_file"
	if c.v2 {
		usageFile, inactiveKey = "memory.current", "inactive_file"
	}
	raw, err := readSmall(filepath.Join(dir, usageFile))
	if err != nil {
		return 0, err
	}
	usage, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: not a byte count", usageFile)
	}
	stat, err := readSmall(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return 0, err
	}
	var inactive int64
	sc := bufio.NewScanner(bytes.NewReader(stat))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == inactiveKey {
			if inactive, err = strconv.ParseInt(v, 10, 64); err != nil {
				return 0, fmt.Errorf("memory.stat: %s is not a byte count", inactiveKey)
			}
			break
		}
	}
	return max(0, usage-inactive), nil
}

// readSmall reads a cgroup file, at most 64 KiB of it (memory.stat is a
// few kilobytes).
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Base(path), err)
	}
	return b, nil
}

// SampleWorkingSets reads every known container's working set and hands
// them to the pipeline. A container whose cgroup cannot be read keeps the
// working set it had.
func SampleWorkingSets(ctx context.Context, pipe *Pipeline, cg Cgroups) (int, error) {
	paths, err := pipe.CgroupPaths(ctx)
	if err != nil {
		return 0, err
	}
	ws := make(map[string]int64, len(paths))
	var errs []error
	for id, p := range paths {
		dir, err := cg.Dir(p)
		if err == nil {
			ws[id], err = cg.WorkingSet(dir)
		}
		if err != nil && len(errs) < 4 {
			errs = append(errs, fmt.Errorf("container %s: %w", id, err))
		}
		if err != nil {
			delete(ws, id)
		}
	}
	if len(ws) > 0 {
		if err := pipe.SetWorkingSets(ctx, ws); err != nil {
			return 0, err
		}
	}
	return len(ws), errors.Join(errs...)
}

// sampleEvery samples working sets until ctx ends.
func (p *Provider) sampleEvery(ctx context.Context, pipe *Pipeline, cg Cgroups, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	warned := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := SampleWorkingSets(ctx, pipe, cg); err != nil && !warned && ctx.Err() == nil {
			// Once: a container gone between the listing and the read
			// is ordinary; the log must not fill with it.
			p.log.Warn("reading containers' working sets (their memory floor keeps its last value)", "err", err)
			warned = true
		}
	}
}
