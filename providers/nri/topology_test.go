package nri

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// sysfs writes a fake /sys/devices/system/cpu: place gives each CPU's
// socket and core.
func sysfs(t *testing.T, n int, place func(cpu int) (pkg, core int)) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "online"), fmt.Appendf(nil, "0-%d\n", n-1), 0o644); err != nil {
		t.Fatal(err)
	}
	for c := range n {
		d := filepath.Join(dir, fmt.Sprintf("cpu%d/topology", c))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		pkg, core := place(c)
		os.WriteFile(filepath.Join(d, "physical_package_id"), fmt.Appendf(nil, "%d\n", pkg), 0o644)
		os.WriteFile(filepath.Join(d, "core_id"), fmt.Appendf(nil, "%d\n", core), 0o644)
	}
	return dir
}

func TestDetectTopology(t *testing.T) {
	// 2 sockets × 2 cores × 2 threads, Linux's usual numbering: CPU c is
	// core c%4, socket (c%4)/2.
	dir := sysfs(t, 8, func(c int) (int, int) { return (c % 4) / 2, c % 2 })
	got, err := DetectTopology(dir)
	if err != nil || got.String() != "2x2x2" {
		t.Fatalf("%v %v, want 2x2x2", got, err)
	}
	// Siblings adjacent (0,1 on core 0): not the numbering the policy
	// pins by, refused.
	dir = sysfs(t, 8, func(c int) (int, int) { return c / 4, (c % 4) / 2 })
	if _, err := DetectTopology(dir); err == nil {
		t.Fatal("adjacent siblings accepted")
	}
}
