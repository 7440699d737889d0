package load

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// writeBenchDir writes one Environment and n small NFR documents, ten per
// file, as hack/gendocs does for the whole-process figures.
func writeBenchDir(b *testing.B, n int, unique bool) string {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "setpoint.yaml"), []byte(env), 0o644); err != nil {
		b.Fatal(err)
	}
	var body []byte
	for i := 0; i < n; i++ {
		if i%10 != 0 {
			body = append(body, "---\n"...)
		}
		headroom, p99 := "1.2", "250ms"
		if unique {
			// No section repeats: the fast path's cache never hits.
			headroom, p99 = fmt.Sprintf("%.5f", 1+float64(i)/100000), fmt.Sprintf("%dms", 100+i)
		}
		body = fmt.Appendf(body, "apiVersion: setpoint.dev/v1alpha1\nkind: NFR\nmetadata: {name: svc-%d, namespace: ns-%d}\nspec:\n  target: {kind: Deployment, name: svc-%d}\n  throughput: {minRPS: %d}\n  latency: {p99: %s}\n  memory: {headroom: %s, containers: [app]}\n  enforcement: {replicas: enforce, memory: observe}\n", i, i%50, i, 10+i, p99, headroom)
		if i%10 == 9 || i == n-1 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("nfr-%05d.yaml", i/10)), body, 0o644); err != nil {
				b.Fatal(err)
			}
			body = body[:0]
		}
	}
	return dir
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLoadDir loads and validates 1,000 and 10,000 documents with a
// fresh loader each time, as `setpoint validate` does; cpu-s/op counts both
// cores (the goal is ≤ 1.5 s CPU for 10,000). "shared" documents repeat
// their latency, memory and enforcement sections, as templated specs do;
// "unique" ones repeat nothing, the fast path's worst case.
func BenchmarkLoadDir(b *testing.B) {
	for _, c := range []struct {
		n            int
		unique, full bool
	}{{1000, false, false}, {10000, false, false}, {1000, true, false}, {10000, true, false}, {10000, false, true}, {10000, true, true}} {
		mode, path := "shared", "fast"
		if c.unique {
			mode = "unique"
		}
		if c.full {
			path = "full" // whole-document validation only, for comparison
		}
		n := c.n
		b.Run(fmt.Sprintf("docs=%d/%s/%s", n, mode, path), func(b *testing.B) {
			dir := writeBenchDir(b, n, c.unique)
			b.ResetTimer()
			start := cpuTime()
			for i := 0; i < b.N; i++ {
				l, err := New()
				if err != nil {
					b.Fatal(err)
				}
				l.NoFastPath = c.full
				r := l.LoadDir(dir)
				if len(r.Diags) > 0 || len(r.Documents) != n+1 {
					b.Fatalf("want %d valid documents, got %d and %v", n+1, len(r.Documents), r.Diags[:min(3, len(r.Diags))])
				}
			}
			b.ReportMetric((cpuTime()-start).Seconds()/float64(b.N), "cpu-s/op")
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "docs/s")
		})
	}
}
