package memlimit

import (
	"os"
	"runtime/debug"
	"testing"
	"testing/fstest"
)

// Mount tables as the kernel writes them: v2 alone; a hybrid host (v1's
// memory controller, v2 without it); and a v1 memory mount whose root is the
// container's own cgroup (a cgroup namespace).
const (
	mountsV2     = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n"
	mountsHybrid = "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
	mountsNS = "35 31 0:32 /process_api/f9 /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
)

func TestLimit(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		want  int64
		ok    bool
	}{
		{"v2 with a limit", map[string]string{
			"proc/self/cgroup": "0::/kubepods/pod1/c1\n", "proc/self/mountinfo": mountsV2,
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "536870912\n",
			"sys/fs/cgroup/kubepods/memory.max":         "max\n",
		}, 512 << 20, true},
		{"v2 without", map[string]string{
			"proc/self/cgroup": "0::/\n", "proc/self/mountinfo": mountsV2,
			"sys/fs/cgroup/memory.max": "max\n",
		}, 0, false},
		{"v2: a parent's limit is lower", map[string]string{
			"proc/self/cgroup": "0::/a/b\n", "proc/self/mountinfo": mountsV2,
			"sys/fs/cgroup/a/b/memory.max": "max\n",
			"sys/fs/cgroup/a/memory.max":   "1073741824\n",
		}, 1 << 30, true},
		{"hybrid: the limit on v1, none on v2", map[string]string{
			"proc/self/cgroup":    "4:memory:/kubepods/pod1\n0::/kubepods/pod1\n",
			"proc/self/mountinfo": mountsHybrid,
			"sys/fs/cgroup/memory/kubepods/pod1/memory.limit_in_bytes": "536870912\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":               "9223372036854771712\n",
		}, 512 << 20, true},
		{"v1 unlimited", map[string]string{
			"proc/self/cgroup": "4:memory:/\n", "proc/self/mountinfo": mountsHybrid,
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, 0, false},
		{"v1 in a cgroup namespace: the mount's root is the cgroup", map[string]string{
			"proc/self/cgroup": "4:memory:/process_api/f9\n", "proc/self/mountinfo": mountsNS,
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "402653184\n",
		}, 384 << 20, true},
		{"no /proc (not Linux): no limit, no error", map[string]string{}, 0, false},
	} {
		fsys := fstest.MapFS{}
		for k, v := range c.files {
			fsys[k] = &fstest.MapFile{Data: []byte(v)}
		}
		got, ok, err := Limit(fsys)
		if err != nil || got != c.want || ok != c.ok {
			t.Errorf("%s: %d %v %v, want %d %v", c.name, got, ok, err, c.want, c.ok)
		}
	}
}

func TestLimitRefusesGarbage(t *testing.T) {
	fsys := fstest.MapFS{
		"proc/self/cgroup":         {Data: []byte("0::/\n")},
		"proc/self/mountinfo":      {Data: []byte(mountsV2)},
		"sys/fs/cgroup/memory.max": {Data: []byte("lots\n")},
	}
	if _, _, err := Limit(fsys); err == nil {
		t.Fatal("a limit that is not a number was taken")
	}
}

func TestSetLeavesGOMEMLIMIT(t *testing.T) {
	fsys := fstest.MapFS{
		"proc/self/cgroup":         {Data: []byte("0::/\n")},
		"proc/self/mountinfo":      {Data: []byte(mountsV2)},
		"sys/fs/cgroup/memory.max": {Data: []byte("1073741824\n")},
	}
	env := map[string]string{"GOMEMLIMIT": "100MiB"}
	if n, why, err := Set(fsys, func(k string) string { return env[k] }, DefaultRatio); n != 0 || why == "" || err != nil {
		t.Fatalf("with GOMEMLIMIT set: %d %q %v", n, why, err)
	}
	if _, _, err := Set(fsys, func(string) string { return "" }, 1.5); err == nil {
		t.Fatal("a ratio above 1 was taken")
	}
}

// The machine's own cgroup reads without error (v1 here, v2 elsewhere).
func TestLimitOfThisMachine(t *testing.T) {
	if _, _, err := Limit(os.DirFS("/")); err != nil {
		t.Fatal(err)
	}
}

func TestSetGivesTheRuntimeTheRatio(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	fsys := fstest.MapFS{
		"proc/self/cgroup":         {Data: []byte("0::/\n")},
		"proc/self/mountinfo":      {Data: []byte(mountsV2)},
		"sys/fs/cgroup/memory.max": {Data: []byte("1073741824\n")},
	}
	n, _, err := Set(fsys, func(string) string { return "" }, 0.5)
	if err != nil || n != 512<<20 || debug.SetMemoryLimit(-1) != 512<<20 {
		t.Fatalf("set %d (%v); the runtime's limit is %d, want 512MiB", n, err, debug.SetMemoryLimit(-1))
	}
}
