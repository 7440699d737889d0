#!/usr/bin/env bash
# Builds containerd, its runc shim and ctr at one version from source
# through the Go module proxy (Debian's containerd 1.6 has no NRI v0.2+)
# and caches them by version: the real node of internal/kubetest runs them.
# Idempotent: binaries that report the version are kept. Prints the
# directory holding the three binaries.
#
#   hack/testenv/containerd.sh [VERSION]
set -euo pipefail

VER="${1:-${CONTAINERD_VERSION:-v2.4.2}}"
ROOT="${SETPOINT_TESTENV:-${XDG_CACHE_HOME:-$HOME/.cache}/setpoint-testenv}"
OUT="$ROOT/containerd/$VER"
BINS=(containerd containerd-shim-runc-v2 ctr)

ok=1
for b in "${BINS[@]}"; do
	[ -x "$OUT/$b" ] && go version -m "$OUT/$b" 2>/dev/null |
		grep -Eq "^[[:space:]]+mod[[:space:]]+github.com/containerd/containerd/v2[[:space:]]+$VER([[:space:]]|$)" || ok=0
done
if [ "$ok" = 1 ]; then
	echo "$OUT"
	exit 0
fi
mkdir -p "$OUT"
echo "building containerd $VER from source (minutes, once per version)" >&2
# Static, without the btrfs snapshotter (cgo) nothing here uses: the
# binaries run on any machine of this kind.
for b in "${BINS[@]}"; do
	GOCACHE="$OUT/gocache" GOBIN="$OUT/bin.tmp" CGO_ENABLED=0 GOFLAGS=-tags=no_btrfs \
		go install -trimpath "github.com/containerd/containerd/v2/cmd/$b@$VER" >&2
	mv "$OUT/bin.tmp/$b" "$OUT/$b"
done
rm -rf "$OUT/bin.tmp"
echo "$OUT"
