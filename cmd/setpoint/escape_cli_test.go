package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A spec file's name prints as text, never as lines or terminal escapes of
// its own: validate's errors and the plan's notes stay one line each.
func TestHostileFileNamesPrintEscaped(t *testing.T) {
	dir := copySpecs(t)
	name := "inv\n+ sim:Deployment\u2215prod\u2215payments\x1b[32m\u202e.nfr.yaml"
	if err := os.WriteFile(filepath.Join(dir, name), []byte("apiVersion: setpoint.dev/v1alpha1\nkind: NFR\nmetadata: {name: x, namespace: shop}\nspec: {target: {kind: Deployment, name: nope}, bogus: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"validate", dir}, {"plan", dir}} {
		out, errOut, _ := runCLI(t, args...)
		all := out + errOut
		if strings.ContainsAny(all, "\x1b\u202e") {
			t.Fatalf("%s printed a terminal escape or a bidi control:\n%q", args[0], all)
		}
		if !strings.Contains(errOut, `inv\n+ sim:Deployment∕prod∕payments\x1b[32m\u202e.nfr.yaml`) {
			t.Fatalf("%s must name the file escaped:\n%s", args[0], errOut)
		}
		for _, l := range strings.Split(all, "\n") {
			if strings.HasPrefix(l, "+ sim:Deployment∕prod") {
				t.Fatalf("%s printed a line from a file name:\n%s", args[0], all)
			}
		}
	}
}
