package isolate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/setpoint-dev/setpoint/internal/cgroupfs"
)

// cgroup is a memory cgroup made for one child: the kernel's bound, exact
// where the heap watchdog polls. Version 2 puts the child in at its birth
// (CLONE_INTO_CGROUP); version 1 has the parent write the child's pid before
// sending the request the child waits for, so it evaluates nothing outside.
type cgroup struct {
	dir string
	v2  bool
	fd  int // v2: the directory, open for SysProcAttr.CgroupFD
}

// cgroupPrefix names our cgroups: setpoint-cue-PID-SEQ, PID the parent's.
const cgroupPrefix = "setpoint-cue-"

var cgroupSeq atomic.Int64

// newCgroup makes a memory cgroup with the given bound under this process's
// own, on whichever cgroup version has the memory controller here. It fails
// when there is none we may write to (not root, a read-only cgroupfs).
func newCgroup(limit int64) (*cgroup, error) {
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("reading /proc/self/cgroup: %w", err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading /proc/self/mountinfo: %w", err)
	}
	base, v2, err := memoryCgroup(string(own), string(mounts))
	if err != nil {
		return nil, err
	}
	removeStale(base)
	dir := filepath.Join(base, fmt.Sprintf("%s%d-%d", cgroupPrefix, os.Getpid(), cgroupSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("making a cgroup: %w", err)
	}
	cg := &cgroup{dir: dir, v2: v2, fd: -1}
	bound := strconv.FormatInt(limit, 10)
	if v2 {
		err = cg.write("memory.max", bound)
		// Without swap limited too, the bound would only move the heap to
		// swap. Best effort: a kernel without swap accounting has no file.
		_ = cg.write("memory.swap.max", "0")
	} else {
		err = cg.write("memory.limit_in_bytes", bound)
		// memsw counts memory and swap together; it must not be below
		// the memory limit, so it is written second.
		_ = cg.write("memory.memsw.limit_in_bytes", bound)
	}
	if err == nil && v2 {
		cg.fd, err = syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			err = fmt.Errorf("opening %s: %w", dir, err)
		}
	}
	if err != nil {
		cg.remove()
		return nil, err
	}
	return cg, nil
}

// memoryCgroup finds the directory of this process's own memory cgroup,
// from /proc/self/cgroup and /proc/self/mountinfo. Version 2 is used when
// its memory controller may be given to a child cgroup; else version 1's.
func memoryCgroup(own, mountinfo string) (dir string, v2 bool, err error) {
	m := cgroupfs.Find(own, mountinfo)
	if m.V2 != "" {
		// The controller must be enabled for our children: a cgroup
		// without it has no memory.max.
		ctl, err := os.ReadFile(filepath.Join(m.V2, "cgroup.subtree_control"))
		if err == nil && cgroupfs.HasWord(string(ctl), "memory") {
			return m.V2, true, nil
		}
	}
	if m.V1 == "" {
		return "", false, errors.New("no memory cgroup controller is mounted for this process")
	}
	return m.V1, false, nil
}

func (c *cgroup) write(file, value string) error {
	if err := os.WriteFile(filepath.Join(c.dir, file), []byte(value), 0); err != nil {
		return fmt.Errorf("setting %s: %w", file, err)
	}
	return nil
}

// add moves a started process in (version 1; version 2 starts it there).
func (c *cgroup) add(pid int) error {
	if c.v2 {
		return nil
	}
	return c.write("cgroup.procs", strconv.Itoa(pid))
}

// oomKilled reports whether the kernel killed a process of the cgroup for
// exceeding its bound.
func (c *cgroup) oomKilled() bool {
	file, key := "memory.oom_control", "oom_kill"
	if c.v2 {
		file = "memory.events"
	}
	b, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if n, ok := strings.CutPrefix(line, key+" "); ok {
			v, _ := strconv.Atoi(strings.TrimSpace(n))
			return v > 0
		}
	}
	return false
}

// remove deletes the cgroup; its process must have been reaped.
func (c *cgroup) remove() error {
	if c.fd >= 0 {
		syscall.Close(c.fd)
		c.fd = -1
	}
	if err := os.Remove(c.dir); err != nil {
		return fmt.Errorf("removing cgroup %s: %w", c.dir, err)
	}
	return nil
}

// removeStale removes the cgroups that setpoint processes which no longer
// run left behind (killed before they could remove them). A cgroup that
// still holds a process cannot be removed, so this never breaks a run.
func removeStale(base string) {
	ents, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), cgroupPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.Remove(filepath.Join(base, e.Name()))
		}
	}
}
