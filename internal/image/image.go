// Package image assembles setpoint's container image without a Docker
// daemon and without pulling a base image: one layer of files made here —
// the static binary, the CA certificates, a passwd naming the non-root user
// it runs as — on an empty base, one image per platform, under one OCI
// index. It writes an OCI image layout, or pushes to a registry.
package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user the image runs as: not root, the conventional "nonroot".
const (
	UID  = 65532
	User = "65532:65532"
	// BinaryPath is where the binary sits in the image.
	BinaryPath = "/usr/local/bin/setpoint"
	// CertsPath is where the CA certificates sit (Go's crypto/x509 and
	// most tools look there).
	CertsPath = "/etc/ssl/certs/ca-certificates.crt"
	// RefName is the annotation an OCI layout names an image by (its tag).
	RefName = "org.opencontainers.image.ref.name"
)

// Platform is one image of the index: its OS and architecture and the
// static binary built for it.
type Platform struct {
	OS, Arch string
	Binary   string // path to the binary built for it
}

// Spec is what to assemble.
type Spec struct {
	Version   string // the binary's version, the OCI version label and the tag
	Revision  string // VCS revision, for the revision label ("" to leave out)
	Source    string // the source repository URL, for the source label
	Created   time.Time
	Certs     string // path of a CA bundle to copy in
	Platforms []Platform
}

// Labels are the OCI annotations every image carries.
func (s Spec) Labels() map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "setpoint",
		"org.opencontainers.image.description": "Declarative run-time targets for services, reconciled like Terraform",
		"org.opencontainers.image.version":     s.Version,
		"org.opencontainers.image.source":      s.Source,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.created":     s.Created.UTC().Format(time.RFC3339),
	}
	if s.Revision != "" {
		l["org.opencontainers.image.revision"] = s.Revision
	}
	return l
}

// Index assembles the multi-platform image.
func Index(s Spec) (v1.ImageIndex, error) {
	if s.Version == "" || len(s.Platforms) == 0 {
		return nil, fmt.Errorf("image: a version and at least one platform")
	}
	certs, err := os.ReadFile(s.Certs)
	if err != nil {
		return nil, fmt.Errorf("image: CA certificates: %w", err)
	}
	var idx v1.ImageIndex = empty.Index
	idx = mutate.IndexMediaType(idx, types.OCIImageIndex)
	for _, p := range s.Platforms {
		img, err := platformImage(s, p, certs)
		if err != nil {
			return nil, fmt.Errorf("image %s/%s: %w", p.OS, p.Arch, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch}}})
	}
	return idx, nil
}

func platformImage(s Spec, p Platform, certs []byte) (v1.Image, error) {
	bin, err := os.ReadFile(p.Binary)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := s.Created
	dirs := []string{"etc/", "etc/ssl/", "etc/ssl/certs/", "usr/", "usr/local/", "usr/local/bin/", "tmp/"}
	for _, d := range dirs {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: mode, ModTime: mtime}); err != nil {
			return nil, err
		}
	}
	files := []struct {
		name string
		mode int64
		data []byte
	}{
		{"etc/passwd", 0o644, []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, UID))},
		{"etc/group", 0o644, []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", UID))},
		{CertsPath[1:], 0o644, certs},
		{BinaryPath[1:], 0o755, bin},
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: mtime}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = p.OS, p.Arch
	cf.Created = v1.Time{Time: s.Created}
	cf.Config.User = User
	cf.Config.Entrypoint = []string{BinaryPath}
	cf.Config.Cmd = []string{"watch", "--in-cluster", "/specs"}
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=" + CertsPath}
	cf.Config.Labels = s.Labels()
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: s.Created})
}
