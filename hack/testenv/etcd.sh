#!/usr/bin/env bash
# Builds etcd from its Go module (the server's etcdmain, as the etcd binary
# runs it) and caches the binary by version: Debian's etcd 3.4 lacks
# RequestWatchProgress, which client-go ≥ 0.35 watchers need, and
# Kubernetes v1.35 asks for etcd v3.6. Idempotent; prints the binary's path.
#
#   hack/testenv/etcd.sh [VERSION]
set -euo pipefail

VER="${1:-${ETCD_VERSION:-v3.6.5}}"
ROOT="${SETPOINT_TESTENV:-${XDG_CACHE_HOME:-$HOME/.cache}/setpoint-testenv}"
OUT="$ROOT/etcd/$VER"
BIN="$OUT/etcd"

if [ -x "$BIN" ] && "$BIN" --version 2>/dev/null | grep -q "^etcd Version: ${VER#v}$"; then
	echo "$BIN"
	exit 0
fi
work="$OUT/build"
rm -rf "$work"
mkdir -p "$work"
export GOCACHE="$OUT/gocache" GOFLAGS=-mod=mod
cd "$work"
echo "building etcd $VER from its module (once per version)" >&2
cat >main.go <<'GO'
// etcd as its own binary runs it.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
go mod init setpoint.test/etcd-build >/dev/null 2>&1
go get "go.etcd.io/etcd/server/v3@$VER" >&2
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN.tmp" . >&2
mv "$BIN.tmp" "$BIN"
rm -rf "$work"
"$BIN" --version >&2
echo "$BIN"
