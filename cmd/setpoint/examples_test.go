package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// Every setpoint command the CI examples and the pre-commit hook run is a
// real command with real flags: an example that lies fails here.
func TestCIExamplesRunRealCommands(t *testing.T) {
	files, err := filepath.Glob("../../examples/ci/*.yml")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../.pre-commit-hooks.yaml")
	call := regexp.MustCompile(`\bsetpoint ((?:validate|plan|apply|watch|sim|version)\b[^\n|>;]*)`)
	found := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		for _, m := range call.FindAllStringSubmatch(string(b), -1) {
			args := strings.Fields(strings.TrimSuffix(strings.TrimSpace(m[1]), "||"))
			root := newRootCmd()
			cmd, rest, err := root.Find(args)
			if err != nil {
				t.Errorf("%s: setpoint %s: %v", f, m[1], err)
				continue
			}
			if err := cmd.ParseFlags(rest); err != nil {
				t.Errorf("%s: setpoint %s: %v", f, m[1], err)
				continue
			}
			found++
		}
	}
	if found < 5 {
		t.Fatalf("found %d setpoint commands in %v; the pattern has stopped matching", found, files)
	}
}
