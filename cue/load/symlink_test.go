package load

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWalkStaysInTheDirectory: a symlink out of the spec directory (to a
// file or to /) is reported by its path and not followed, so nothing of
// what it points at is read or quoted; a link within is followed.
func TestWalkStaysInTheDirectory(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.yaml")
	if err := os.WriteFile(secret, []byte("kind: TOPSECRET-hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := "apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: e}\nspec:\n  providers: [{name: kubernetes}]\n"
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "env.yaml"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"leak.yaml": secret, "root": "/", "up": outside, "in.yaml": filepath.Join(dir, "sub", "env.yaml")} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	files, _, diags := walk(dir)
	for _, f := range files {
		if !strings.HasPrefix(f, dir) || strings.Contains(f, "secret") {
			t.Fatalf("walked to %s", f)
		}
	}
	if len(files) != 2 {
		t.Fatalf("want sub/env.yaml and the link in.yaml: %v", files)
	}
	var text []string
	for _, d := range diags {
		text = append(text, d.Error())
	}
	all := strings.Join(text, "\n")
	for _, l := range []string{"leak.yaml", "root", "up"} {
		if !strings.Contains(all, filepath.Join(dir, l)+": symlink leads outside the spec directory; not followed") {
			t.Errorf("no diagnostic for %s:\n%s", l, all)
		}
	}
	if strings.Contains(all, "TOPSECRET") {
		t.Fatalf("quoted a file outside:\n%s", all)
	}
}
