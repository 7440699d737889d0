// Command image builds setpoint's container image with no Docker daemon and
// no base image to pull (internal/image): a static binary per platform,
// built here, under one OCI index, tagged with the binary's version. It
// writes an OCI image layout directory (-out), or pushes it (-push
// REGISTRY/REPO, tagged with the version; credentials from the Docker
// config, as docker login leaves them).
//
//	go run ./hack/image -version v0.3.0 -out bin/image
//	go run ./hack/image -version v0.3.0 -push ghcr.io/you/setpoint
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/setpoint-dev/setpoint/internal/image"
)

func main() {
	version := flag.String("version", "", "the version to stamp in the binary and tag the image with (required)")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "comma-separated OS/ARCH")
	out := flag.String("out", "", "write an OCI image layout into this directory")
	push := flag.String("push", "", "push to this repository, tagged with the version")
	source := flag.String("source", "https://github.com/setpoint-dev/setpoint", "the source repository, for the label")
	certs := flag.String("certs", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle to put in the image")
	flag.Parse()
	if *version == "" || *out == "" && *push == "" {
		log.Fatal("image: -version, and -out or -push")
	}
	work, err := os.MkdirTemp("", "setpoint-image-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(work)
	spec := image.Spec{Version: *version, Revision: revision(), Source: *source, Certs: *certs, Created: created()}
	for _, pl := range strings.Split(*platforms, ",") {
		osName, arch, ok := strings.Cut(strings.TrimSpace(pl), "/")
		if !ok {
			log.Fatalf("image: platform %q: want OS/ARCH", pl)
		}
		bin := filepath.Join(work, osName+"-"+arch, "setpoint")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X github.com/setpoint-dev/setpoint/internal/version.Version="+*version, "-o", bin, "./cmd/setpoint")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+osName, "GOARCH="+arch)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		fmt.Fprintf(os.Stderr, "building setpoint %s for %s/%s\n", *version, osName, arch)
		if err := cmd.Run(); err != nil {
			log.Fatalf("image: building for %s: %v", pl, err)
		}
		spec.Platforms = append(spec.Platforms, image.Platform{OS: osName, Arch: arch, Binary: bin})
	}
	idx, err := image.Index(spec)
	if err != nil {
		log.Fatal(err)
	}
	if *out != "" {
		if err := os.RemoveAll(*out); err != nil {
			log.Fatal(err)
		}
		// The layout's own index names the image by its tag, as skopeo
		// and crane read it ("oci:DIR:TAG").
		p, err := layout.Write(*out, empty.Index)
		if err != nil {
			log.Fatal(err)
		}
		if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{image.RefName: *version})); err != nil {
			log.Fatal(err)
		}
		digest, _ := idx.Digest()
		fmt.Printf("wrote %s (index %s, tag %s)\n", *out, digest, *version)
	}
	if *push != "" {
		ref, err := name.NewTag(*push + ":" + *version)
		if err != nil {
			log.Fatal(err)
		}
		if err := remote.WriteIndex(ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("pushed %s\n", ref)
	}
}

// revision is the checkout's commit, when there is one.
func revision() string {
	b, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// created is SOURCE_DATE_EPOCH when set (a reproducible build), else now.
func created() time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		var sec int64
		if _, err := fmt.Sscan(s, &sec); err == nil {
			return time.Unix(sec, 0).UTC()
		}
	}
	return time.Now().UTC().Truncate(time.Second)
}
