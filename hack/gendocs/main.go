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
	flag.Parse()
	if err := Write(*out, *n, *per, *unique); err != nil {
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
