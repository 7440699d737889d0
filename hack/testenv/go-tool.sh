#!/usr/bin/env bash
# Installs a Go command at a version into the testenv cache, once:
# kwok and metrics-server, which the full control plane runs. Idempotent;
# prints the binary's path.
#
#   hack/testenv/go-tool.sh NAME PACKAGE VERSION
#   hack/testenv/go-tool.sh kwok sigs.k8s.io/kwok/cmd/kwok v0.8.0
set -euo pipefail

NAME="${1:?name}" PKG="${2:?package}" VER="${3:?version}"
ROOT="${SETPOINT_TESTENV:-${XDG_CACHE_HOME:-$HOME/.cache}/setpoint-testenv}"
OUT="$ROOT/$NAME/$VER"
BIN="$OUT/$NAME"
# A binary is kept only when it was built from this package at this
# version (go version -m reads what the build recorded).
if [ -x "$BIN" ] && go version -m "$BIN" 2>/dev/null | grep -Eq "^[[:space:]]+path[[:space:]]+$PKG$" &&
	go version -m "$BIN" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]].*[[:space:]]$VER([[:space:]]|$)"; then
	echo "$BIN"
	exit 0
fi
mkdir -p "$OUT"
echo "installing $NAME $VER (once per version)" >&2
GOCACHE="$OUT/gocache" GOBIN="$OUT/bin.tmp" CGO_ENABLED=0 go install -trimpath "$PKG@$VER" >&2
mv "$OUT/bin.tmp/$(basename "$PKG")" "$BIN"
rm -rf "$OUT/bin.tmp"
echo "$BIN"
