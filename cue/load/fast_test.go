package load

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

// bothPaths loads src with the fast path and with whole-document validation
// and fails if they disagree on any diagnostic or any decoded value.
func bothPaths(t testing.TB, fast, full *Loader, name string, src []byte) (int, int) {
	t.Helper()
	var a, b []spec.Document
	da := fast.LoadBytes(name, src, func(d spec.Document) { a = append(a, d) })
	db := full.LoadBytes(name, src, func(d spec.Document) { b = append(b, d) })
	if da.Error() != db.Error() {
		t.Fatalf("%s: diagnostics differ\nfast:\n%v\nfull:\n%v", name, da, db)
	}
	if len(a) != len(b) {
		t.Fatalf("%s: fast path decoded %d documents, full path %d", name, len(a), len(b))
	}
	for i := range a {
		ja, _ := json.Marshal(a[i])
		jb, _ := json.Marshal(b[i])
		if string(ja) != string(jb) || spec.Digest(a[i]) != spec.Digest(b[i]) || a[i].Head().Src.Pos != b[i].Head().Src.Pos {
			t.Fatalf("%s document %d differs\nfast: %s\nfull: %s", name, i, ja, jb)
		}
	}
	return len(a), len(da)
}

// TestFastPathMatchesFullPath is what makes the fast path sound: over every
// corpus file and a set of generated variations, it must decode the same
// values and report the same errors as validating whole documents.
func TestFastPathMatchesFullPath(t *testing.T) {
	fast, full := newLoader(t), newLoader(t)
	full.NoFastPath = true
	var files []string
	for _, g := range []string{"../../specs/*.yaml", "../../testdata/valid/*.yaml", "../../testdata/invalid/*.yaml"} {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	docs, diags := 0, 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Twice: the second time every section comes from the cache.
		for range 2 {
			d, e := bothPaths(t, fast, full, f, src)
			docs, diags = docs+d, diags+e
		}
	}
	// Sections that are valid alone but wrong in place, unknown sections,
	// and values that only differ in form.
	variants := []string{
		"memory: {min: 1Gi, max: 512Mi}",
		"memory: {min: 1Gi}",
		"memory: {request: 1Gi, limit: 512Mi}",
		"memory: {containers: [a, a]}",
		"throughput: {minRPS: 400}",
		"throughput: {minRPS: 400.0}",
		"throughput: {minRPS: '400'}",
		"bogus: {}",
		"autoscaler: {create: true}",
		"autoscaler: {create: false}",
		"safety: {tolerance: 10%}",
		"safety: {tolerance: \"10%\"}",
		"enforcement: {replicas: enforce}",
		"enforcement: {replicas: Enforce}",
		"paused: yes",
		"paused: true",
		"cpuPerPod: 1",
		"cpuPerPod: 1000m",
		"target: {kind: Deployment}",
		"takeOverFrom: [argocd-controller]",
		"signals: {rps: x}",
	}
	for i, v := range variants {
		src := []byte(nfr("v", "v") + "  " + v + "\n")
		for range 2 {
			d, e := bothPaths(t, fast, full, fmt.Sprintf("variant-%d.yaml", i), src)
			docs, diags = docs+d, diags+e
		}
	}
	for i, top := range []string{
		"apiVersion: setpoint.dev/v1alpha2\nkind: NFR\nmetadata: {name: a}\nspec: {target: {kind: Deployment, name: a}}\n",
		"apiVersion: setpoint.dev/v1alpha1\nkind: NFR\nmetadata: {name: a}\n",
		"apiVersion: setpoint.dev/v1alpha1\nkind: NFR\nmetadata: {name: a}\nspec: {target: {kind: Deployment, name: a}}\nstatus: {}\n",
		"apiVersion: setpoint.dev/v1alpha1\nkind: NFR\nmetadata: {name: a, extra: 1}\nspec: {target: {kind: Deployment, name: a}}\n",
		"apiVersion: setpoint.dev/v1alpha1\nkind: NFR\nmetadata: {name: a}\nspec: [1]\n",
	} {
		d, e := bothPaths(t, fast, full, fmt.Sprintf("top-%d.yaml", i), []byte(top))
		docs, diags = docs+d, diags+e
	}
	if docs < 20 || diags < 40 {
		t.Fatalf("too little compared: %d documents, %d diagnostics", docs, diags)
	}
}
