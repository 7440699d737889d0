package image_test

import (
	"archive/tar"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/setpoint-dev/setpoint/internal/image"
)

// TestImage builds the binary for this machine, assembles the image,
// writes it as an OCI layout tagged with the version, and reads it back as
// a runtime would: the tag is the version; the config runs the binary as
// the non-root user with the OCI labels; its one layer holds the binary,
// which runs `version` and says that version, and the CA certificates.
func TestImage(t *testing.T) {
	const version = "v0.0.0-imagetest"
	dir := t.TempDir()
	bin := filepath.Join(dir, "setpoint")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-X github.com/setpoint-dev/setpoint/internal/version.Version="+version, "-o", bin, "../../cmd/setpoint")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	idx, err := image.Index(image.Spec{Version: version, Source: "https://example.test/setpoint", Revision: "abc123",
		Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Certs: "/etc/ssl/certs/ca-certificates.crt",
		Platforms: []image.Platform{{OS: runtime.GOOS, Arch: runtime.GOARCH, Binary: bin}}})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "layout")
	p, err := layout.Write(out, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{image.RefName: version})); err != nil {
		t.Fatal(err)
	}

	// Read back from disk, as skopeo or crane would.
	root, err := layout.ImageIndexFromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	top, err := root.IndexManifest()
	if err != nil || len(top.Manifests) != 1 || top.Manifests[0].Annotations[image.RefName] != version {
		t.Fatalf("the layout's index: %+v, %v: want one entry tagged %s", top, err, version)
	}
	ii, err := root.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := ii.IndexManifest()
	if err != nil || len(im.Manifests) != 1 || im.Manifests[0].Platform == nil || im.Manifests[0].Platform.Architecture != runtime.GOARCH {
		t.Fatalf("the image index: %+v, %v", im, err)
	}
	img, err := ii.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != image.User || len(c.Entrypoint) != 1 || c.Entrypoint[0] != image.BinaryPath || cf.Architecture != runtime.GOARCH {
		t.Fatalf("config: user %q entrypoint %v arch %s", c.User, c.Entrypoint, cf.Architecture)
	}
	for k, want := range map[string]string{"org.opencontainers.image.version": version, "org.opencontainers.image.revision": "abc123",
		"org.opencontainers.image.source": "https://example.test/setpoint", "org.opencontainers.image.created": "2026-01-02T03:04:05Z"} {
		if c.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], want)
		}
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers, %v: want one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := map[string]bool{}
	tr := tar.NewReader(rc)
	extracted := filepath.Join(dir, "from-image")
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got["/"+h.Name] = true
		if "/"+h.Name == image.BinaryPath {
			if h.Mode&0o111 == 0 || h.Uid != 0 {
				t.Errorf("binary mode %o uid %d: want executable, root-owned", h.Mode, h.Uid)
			}
			f, err := os.OpenFile(extracted, os.O_CREATE|os.O_WRONLY, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	for _, f := range []string{image.BinaryPath, image.CertsPath, "/etc/passwd", "/tmp/"} {
		if !got[f] {
			t.Errorf("the layer has no %s", f)
		}
	}
	v, err := exec.Command(extracted, "version").Output()
	if err != nil || !strings.HasPrefix(string(v), "setpoint "+version+" ") {
		t.Fatalf("the image's binary says %q, %v: want setpoint %s", v, err, version)
	}
}
