// Package installtest installs the shipped deploy/ on internal/kubetest's
// plane with a real node, as a user installs it: the image built here and
// imported into the node's containerd, deploy/ built with kustomize's Go
// API through an overlay that sets only what docs/install.md documents.
package installtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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

// Overlay writes an overlay kustomization into dir over repo's deploy/:
// the image (ImageName:tag), the API server's address for clusters
// without kube-proxy (docs/install.md), and the components named (paths
// under deploy/components).
func Overlay(dir, repo, tag, apiHost, apiPort string, components ...string) error {
	rel, err := filepath.Rel(dir, filepath.Join(repo, "deploy"))
	if err != nil {
		return err
	}
	var comps []string
	for _, c := range components {
		comps = append(comps, fmt.Sprintf("%q", filepath.Join(rel, "components", c)))
	}
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [%q]
components: [%s]
images:
- {name: ghcr.io/setpoint-dev/setpoint, newName: %s, newTag: %q}
patches:
- path: api-server.yaml
`, rel, strings.Join(comps, ", "), ImageName, tag)
	// As docs/install.md shows it: where no kube-proxy routes the
	// kubernetes Service, the pods are told the API server's address.
	api := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: setpoint, namespace: setpoint-system}
spec:
  template:
    spec:
      containers:
      - name: setpoint
        env:
        - {name: KUBERNETES_SERVICE_HOST, value: %q}
        - {name: KUBERNETES_SERVICE_PORT, value: %q}
`, apiHost, apiPort)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "api-server.yaml"), []byte(api), 0o644)
}
