package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSpecPathsStayInTheDirectory: a path a spec names that resolves
// outside the spec directory stops plan, at the field, without a byte of
// the file it names; nothing is created outside; --allow-outside-paths
// lets it through.
func TestSpecPathsStayInTheDirectory(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.csv")
	if err := os.WriteFile(secret, []byte("TOPSECRET-LINE,1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, from, to string
		want           string
	}{
		{"absolute trace", "trace: traces/azure-llm-conv-2023.csv", "trace: " + secret, "setpoint.yaml:11:9: spec.providers.0.config.trace: trace " + secret + " is outside the spec directory"},
		{"relative trace", "trace: traces/azure-llm-conv-2023.csv", "trace: ../../../../../../../../.." + secret, "spec.providers.0.config.trace: trace ../../../../../../../../.." + secret + " resolves to " + secret + ", outside the spec directory"},
		{"symlinked trace", "trace: traces/azure-llm-conv-2023.csv", "trace: traces/link.csv", "resolves to " + secret + ", outside the spec directory"},
		{"state path", "path: .setpoint/state.json", "path: ../escape/state.json", "setpoint.yaml:100:26: spec.state.path: state.path ../escape/state.json resolves to "},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := copySpecs(t, [3]string{"setpoint.yaml", c.from, c.to})
			if err := os.Symlink(secret, filepath.Join(dir, "traces", "link.csv")); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"validate", dir}, {"plan", dir}, {"apply", "--auto-approve", dir}} {
				cmd := args[0]
				out, err := exec.Command(binary, args...).CombinedOutput()
				if err == nil || !strings.Contains(string(out), c.want) || !strings.Contains(string(out), "--allow-outside-paths") {
					t.Fatalf("%s: %v, want %q in:\n%s", cmd, err, c.want, out)
				}
				if strings.Contains(string(out), "TOPSECRET") {
					t.Fatalf("%s echoed the file's content:\n%s", cmd, out)
				}
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape")); err == nil {
				t.Fatal("a directory was created outside the spec directory")
			}
		})
	}
	t.Run("trusted", func(t *testing.T) {
		dir := copySpecs(t, [3]string{"setpoint.yaml", "path: .setpoint/state.json", "path: ../escape/state.json"})
		out, err := exec.Command(binary, "plan", "--allow-outside-paths", dir).CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape", "state.json.d")); err != nil {
			t.Fatalf("the trusted state path was not used: %v\n%s", err, out)
		}
	})
}

// TestKubeconfigNotFromSpecs: credentials come from the operator, never
// from a file a pull request can change.
func TestKubeconfigNotFromSpecs(t *testing.T) {
	dir := copySpecs(t, [3]string{"setpoint.yaml", "  pluginPath: [", "    - name: kubernetes\n      config: {kubeconfig: /root/.kube/config, context: prod}\n  pluginPath: ["})
	out, err := exec.Command(binary, "plan", dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "spec.providers.1.config.kubeconfig: a kubeconfig path cannot come from a spec (expected the --kubeconfig flag or $KUBECONFIG") ||
		!strings.Contains(string(out), "spec.providers.1.config.context: a kubeconfig context cannot come from a spec") {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestPluginsNotFromTheRepository: a pull request can add a binary
// anywhere in its repository, so pluginPath entries inside the git work
// tree holding the specs (not only the spec directory) are not searched.
func TestPluginsNotFromTheRepository(t *testing.T) {
	repo := t.TempDir()
	if err := os.Mkdir(filepath.Join(repo, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	specs := filepath.Join(repo, "deploy", "specs")
	if err := os.MkdirAll(specs, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(repo, "PWNED")
	if err := os.WriteFile(filepath.Join(repo, "setpoint-provider-evil"), []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := "apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: prod}\nspec:\n  providers: [{name: evil}]\n  pluginPath: [../..]\n"
	if err := os.WriteFile(filepath.Join(specs, "env.yaml"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary, "plan", specs).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not searched") {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a binary from the repository ran")
	}
}

// TestStateFilesBesideTheStatePathAreChecked: a link planted beside the
// state file (the lock, the shard directory, the sim state) cannot send a
// write outside the spec directory.
func TestStateFilesBesideTheStatePathAreChecked(t *testing.T) {
	for _, name := range []string{"state.json.lock", "state.json.d", "sim-state.json", "sim-state.json.lock"} {
		t.Run(name, func(t *testing.T) {
			dir := copySpecs(t)
			victim := filepath.Join(t.TempDir(), "victim")
			if err := os.WriteFile(victim, []byte("keep me"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(dir, ".setpoint"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(victim, filepath.Join(dir, ".setpoint", name)); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(binary, "apply", "--auto-approve", dir).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "state.path's "+name+" ") || !strings.Contains(string(out), "outside the spec directory") {
				t.Fatalf("%v\n%s", err, out)
			}
			if b, _ := os.ReadFile(victim); string(b) != "keep me" {
				t.Fatalf("the file outside was written: %q", b)
			}
		})
	}
}
