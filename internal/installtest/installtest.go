// Package installtest installs the shipped deploy/ on internal/kubetest's
// plane with a real node, as a user installs it: the image built here and
// imported into the node's containerd, deploy/ built with kustomize's Go
// API through an overlay that sets only what docs/install.md documents.
package installtest

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/setpoint-dev/setpoint/internal/image"
)

// ImageName is the name the test image is imported under; deploy/'s image
// is set to it as a user sets their registry's.
const ImageName = "setpoint.test/setpoint"

// BuildImage builds setpoint for this machine (static, as make image does)
// and writes its image, tagged ImageName:tag, as an archive at path.
func BuildImage(ctx context.Context, repo, dir, tag string) (string, error) {
	bin := filepath.Join(dir, "setpoint")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w -X github.com/setpoint-dev/setpoint/internal/version.Version="+tag, "-o", bin, "./cmd/setpoint")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building setpoint: %w: %s", err, out)
	}
	idx, err := image.Index(image.Spec{Version: tag, Source: "https://github.com/setpoint-dev/setpoint", Certs: "/etc/ssl/certs/ca-certificates.crt",
		Created: time.Unix(0, 0).UTC(), Platforms: []image.Platform{{OS: "linux", Arch: runtime.GOARCH, Binary: bin}}})
	if err != nil {
		return "", err
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		return "", fmt.Errorf("the image index: %v (%d manifests)", err, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return "", err
	}
	ref, err := name.NewTag(ImageName + ":" + tag)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "setpoint-image.tar")
	return path, tarball.WriteToFile(path, ref, img)
}

// Build runs kustomize (its Go API, as `kubectl apply -k` does) on the
// overlay directory, which may name resources outside itself (deploy/).
func Build(overlay string) (string, error) {
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsNone
	res, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), overlay)
	if err != nil {
		return "", fmt.Errorf("kustomize build %s: %w", overlay, err)
	}
	b, err := res.AsYaml()
	return string(b), err
}

// RepoRoot is the repository's root, found from the working directory.
func RepoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		d = parent
	}
}

// Overlay is what a test's overlay of deploy/ sets, each an install
// setting docs/install.md documents.
type Overlay struct {
	// Tag is the image's (ImageName:Tag).
	Tag string
	// APIHost and APIPort are the API server's address for clusters
	// without kube-proxy, given to the controller and the agents.
	APIHost, APIPort string
	// Components are paths under deploy/components.
	Components []string
	// Patches are more strategic-merge patches (file name → body).
	Patches map[string]string
}

// Write writes the overlay's kustomization into dir over repo's deploy/.
func (o Overlay) Write(dir, repo string) error {
	rel, err := filepath.Rel(dir, filepath.Join(repo, "deploy"))
	if err != nil {
		return err
	}
	var comps []string
	for _, c := range o.Components {
		comps = append(comps, fmt.Sprintf("%q", filepath.Join(rel, "components", c)))
	}
	// As docs/install.md shows it: where no kube-proxy routes the
	// kubernetes Service, the pods are told the API server's address.
	patches := map[string]string{"api-server.yaml": fmt.Sprintf(apiServerPatch, "Deployment", "setpoint", "setpoint", o.APIHost, o.APIPort),
		// Both agents' containers are "agent"; the patch goes to the
		// DaemonSets there are (a component may have removed them).
		"api-server-agents.yaml": fmt.Sprintf(apiServerPatch, "DaemonSet", "agents", "agent", o.APIHost, o.APIPort)}
	for name, body := range o.Patches {
		patches[name] = body
	}
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%q]\ncomponents: [%s]\n", rel, strings.Join(comps, ", "))
	fmt.Fprintf(&b, "images:\n- {name: ghcr.io/setpoint-dev/setpoint, newName: %s, newTag: %q}\npatches:\n", ImageName, o.Tag)
	for _, name := range slices.Sorted(maps.Keys(patches)) {
		fmt.Fprintf(&b, "- path: %s\n", name)
		if name == "api-server-agents.yaml" {
			b.WriteString("  target: {kind: DaemonSet, namespace: setpoint-system}\n")
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(patches[name]), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(b.String()), 0o644)
}

const apiServerPatch = `apiVersion: apps/v1
kind: %s
metadata: {name: %s, namespace: setpoint-system}
spec:
  template:
    spec:
      containers:
      - name: %s
        env:
        - {name: KUBERNETES_SERVICE_HOST, value: %q}
        - {name: KUBERNETES_SERVICE_PORT, value: %q}
`
