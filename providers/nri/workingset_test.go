package nri

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/decide/nodepolicy"
	"github.com/setpoint-dev/setpoint/internal/nritest"
	"github.com/setpoint-dev/setpoint/internal/testutil"
)

// The runtime's cgroups paths, in both drivers' forms, resolve inside the
// hierarchy; nothing a path says leaves it.
func TestCgroupDir(t *testing.T) {
	cg := Cgroups{base: "/sys/fs/cgroup/memory"}
	for _, c := range []struct{ in, want, err string }{
		{"/kubepods/burstable/pod1234/abcd", "/sys/fs/cgroup/memory/kubepods/burstable/pod1234/abcd", ""},
		{"kubepods-burstable-pod12_34.slice:cri-containerd:abcd", "/sys/fs/cgroup/memory/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12_34.slice/cri-containerd-abcd.scope", ""},
		{"-.slice:docker:abcd", "/sys/fs/cgroup/memory/docker-abcd.scope", ""},
		{"system.slice::abcd", "/sys/fs/cgroup/memory/system.slice/abcd.scope", ""},
		{"/kubepods/../../../etc", "", "leaves the hierarchy"},
		{"kubepods.slice:cri-containerd:../../../etc", "", "leaves the hierarchy"},
		{"kube/pods.slice:x:y", "", "systemd slice"},
		{"kube--pods.slice:x:y", "", "systemd slice"},
		{"kubepods:x", "", "want /a/b or slice:prefix:name"},
		{"", "", "cgroups path of 0 bytes"},
		{"/" + strings.Repeat("a", maxCgroupPath), "", "want 1 to 4096"},
	} {
		got, err := cg.Dir(c.in)
		if c.err == "" && (err != nil || got != c.want) || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("Dir(%.60q) = %q, %v; want %q, error %q", c.in, got, err, c.want, c.err)
		}
	}
}

// The working set is usage less the inactive file cache, in each version's
// files; never below 0.
func TestWorkingSetFiles(t *testing.T) {
	for _, c := range []struct {
		v2          bool
		usage, stat string
		want        int64
	}{
		{false, "104857600\n", "cache 1\ntotal_cache 5\ninactive_file 999\ntotal_inactive_file 4194304\n", 100<<20 - 4<<20},
		{true, "104857600\n", "anon 1\nactive_file 3\ninactive_file 4194304\n", 100<<20 - 4<<20},
		{true, "10\n", "inactive_file 20\n", 0},
	} {
		dir := t.TempDir()
		usage := "memory.usage_in_bytes"
		if c.v2 {
			usage = "memory.current"
		}
		if err := os.WriteFile(filepath.Join(dir, usage), []byte(c.usage), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "memory.stat"), []byte(c.stat), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := (Cgroups{v2: c.v2}).WorkingSet(dir); err != nil || got != c.want {
			t.Errorf("v2 %t: %d, %v; want %d", c.v2, got, err, c.want)
		}
	}
}

const (
	allocEnv   = "SETPOINT_NRI_ALLOC_MIB"
	allocReady = "allocated"
)

// allocChild waits for a line on stdin (it is in its cgroup then), takes
// and touches the memory asked, says so, and holds it until stdin closes.
func allocChild() {
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		os.Exit(1)
	}
	mib, _ := strconv.Atoi(os.Getenv(allocEnv))
	buf := make([]byte, mib<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	fmt.Println(allocReady)
	_, _ = io.Copy(io.Discard, in)
	fmt.Fprint(io.Discard, buf[len(buf)-1])
}

// A container's memory limit never goes below its working set, read from
// its real memory cgroup: a process that holds 48 MiB in the container's
// cgroup lifts the NFR's 16 MiB limit to what it uses.
func TestWorkingSetFloorsTheLimit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test makes a memory cgroup: run it as root (make test does)")
	}
	cg, err := OpenCgroups(DefaultCgroupRoot)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("setpoint-test-ws-%d", os.Getpid())
	dir := filepath.Join(cg.base, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), allocEnv+"=48")
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = child.Wait()
		_ = os.Remove(dir) // empty once the child is gone
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(child.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || strings.TrimSpace(line) != allocReady {
		t.Fatalf("the child: %q, %v", line, err)
	}

	rt := nritest.Start(t)
	pol := shopPolicy(2, nodepolicy.Enforce)
	pol.Config.Memory, pol.Config.MemoryFromNFR = nodepolicy.Enforce, true
	a := startAgent(t, rt, filepath.Join(t.TempDir(), "cache.json"), pol)
	ctx := context.Background()
	pod := nritest.Pod("p1", "shop", "web-5d9f8-x2x4q", nil)
	c := nritest.Container(pod, "c1", "app", 500, 512<<20)
	c.Linux.CgroupsPath = "/" + name
	if _, err := rt.Create(ctx, pod, c); err != nil {
		t.Fatal(err)
	}
	if err := a.p.SetMemory(ctx, "shop/web", map[string]int64{"app": 16 << 20}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the NFR's 16 MiB limit", func() bool { return resourcesOf(rt, "c1").Limit == 16<<20 })

	n, err := SampleWorkingSets(ctx, a.p, cg)
	if err != nil || n != 1 {
		t.Fatalf("sampled %d, %v", n, err)
	}
	testutil.Eventually(t, 10*time.Second, "the limit lifted to the working set", func() bool { return resourcesOf(rt, "c1").Limit >= 48<<20 })
	if l := resourcesOf(rt, "c1").Limit; l > 256<<20 {
		t.Fatalf("limit %d MiB: want the working set (48 MiB and the process's own)", l>>20)
	}
	snap, err := a.p.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if why := snap.Result.Assign["c1"].MemoryWhy; !strings.Contains(why, "working set") {
		t.Fatalf("the limit's reason %q: want the working set named", why)
	}
}

// A working set is recorded again only when it moved by more than 1 MiB
// and 5%: a sample every few seconds does not rewrite the cache for noise.
func TestWorkingSetMoved(t *testing.T) {
	for _, c := range []struct {
		old, v int64
		want   bool
	}{
		{0, 2 << 20, true},
		{0, 1 << 20, false},           // 1 MiB: not more than 1 MiB
		{100 << 20, 104 << 20, false}, // 4%
		{100 << 20, 106 << 20, true},
		{100 << 20, 94 << 20, true},
		{10 << 30, 10<<30 + 400<<20, false}, // 400 MiB of 10 GiB: under 5%
	} {
		if got := workingSetMoved(c.old, c.v); got != c.want {
			t.Errorf("workingSetMoved(%d, %d) = %t", c.old, c.v, got)
		}
	}
}
