// Command gendocs writes a directory of small, valid spec documents for the
// load benchmarks: one Environment and N NFRs, ten documents per file.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	n := flag.Int("n", 1000, "number of NFR documents")
	per := flag.Int("per-file", 10, "documents per file")
	out := flag.String("out", "", "directory to create")
	unique := flag.Bool("unique", false, "make every section of every document distinct")
	simWorld := flag.Bool("sim", false, "an Environment with a sim world holding every target, over a constant trace")
	flag.Parse()
	if err := Write(*out, *n, *per, *unique); err != nil {
		log.Fatal(err)
	}
	if !*simWorld {
		return
	}
	if err := writeSim(*out, *n); err != nil {
		log.Fatal(err)
	}
}

// Write creates dir with an Environment and n NFR documents.
func Write(dir string, n, per int, unique bool) error {
	if dir == "" {
		return fmt.Errorf("-out is required")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	env := "apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: bench}\nspec:\n  providers: [{name: kubernetes, config: {}}]\n"
	if err := os.WriteFile(filepath.Join(dir, "setpoint.yaml"), []byte(env), 0o644); err != nil {
		return err
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		headroom, p99 := "1.2", "250ms"
		if unique {
			headroom, p99 = fmt.Sprintf("%.5f", 1+float64(i)/100000), fmt.Sprintf("%dms", 100+i)
		}
		if i%per != 0 {
			b.WriteString("---\n")
		}
		fmt.Fprintf(&b, `apiVersion: setpoint.dev/v1alpha1
kind: NFR
metadata: {name: svc-%d, namespace: ns-%d}
spec:
  target: {kind: Deployment, name: svc-%d}
  throughput: {minRPS: %d}
  latency: {p99: %s}
  memory: {headroom: %s, containers: [app]}
  enforcement: {replicas: enforce, memory: observe}
`, i, i%50, i, 10+i, p99, headroom)
		if i%per == per-1 || i == n-1 {
			name := filepath.Join(dir, fmt.Sprintf("nfr-%05d.yaml", i/per))
			if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
				return err
			}
			b.Reset()
		}
	}
	return nil
}

// writeSim replaces the Environment with one whose sim world has a
// Deployment with an HPA for every NFR, over 10 minutes of a constant
// 20,000 req/s trace; one-shot plans look at minute 2.
func writeSim(dir string, n int) error {
	var b strings.Builder
	b.WriteString("second,rate\n")
	for i := 0; i < 600; i++ {
		fmt.Fprintf(&b, "%d,20000\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "trace.csv"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	b.Reset()
	b.WriteString("apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: bench}\nspec:\n  providers:\n    - name: sim\n      config:\n        trace: trace.csv\n        start: 2m\n        workloads:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "          - {kind: Deployment, namespace: ns-%d, name: svc-%d, replicas: 1, hpa: {min: 1, max: 10, targetRPS: 1000}, perPodRPS: 100, share: %g, containers: [{name: app, request: 256Mi, limit: 512Mi, workingSet: 100Mi}]}\n", i%50, i, 1.0/float64(n))
	}
	return os.WriteFile(filepath.Join(dir, "setpoint.yaml"), []byte(b.String()), 0o644)
}
