package cgroupfs

import "testing"

func TestFind(t *testing.T) {
	for _, c := range []struct {
		name, own, mounts string
		want              Memory
	}{
		{"v2", "0::/kubepods/c1\n", "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
			Memory{V2: "/sys/fs/cgroup/kubepods/c1", V2Mount: "/sys/fs/cgroup"}},
		{"hybrid", "4:memory:/a\n1:cpu:/a\n0::/a\n",
			"32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n" +
				"35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n" +
				"41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
			Memory{V1: "/sys/fs/cgroup/memory/a", V1Mount: "/sys/fs/cgroup/memory", V2: "/sys/fs/cgroup/unified/a", V2Mount: "/sys/fs/cgroup/unified"}},
		{"v1 controllers together, mount root the process's cgroup", "5:cpu,memory:/ns/p\n",
			"35 31 0:32 /ns /sys/fs/cgroup/cpu\\040mem rw - cgroup cgroup rw,cpu,memory\n",
			Memory{V1: "/sys/fs/cgroup/cpu mem/p", V1Mount: "/sys/fs/cgroup/cpu mem"}},
		{"a mount of another cgroup is not ours", "4:memory:/a\n",
			"35 31 0:32 /b /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n", Memory{}},
		{"nothing mounted", "4:memory:/a\n", "", Memory{}},
	} {
		if got := Find(c.own, c.mounts); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
