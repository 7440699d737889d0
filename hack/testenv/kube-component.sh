#!/usr/bin/env bash
# Builds a Kubernetes component (kube-apiserver, kube-controller-manager,
# kube-scheduler) from source through the Go module proxy (there is no
# Debian package and no release download here) and caches the binary by
# version. Idempotent: a cached binary that reports the right version is
# kept. The components of one version share one build cache (the
# apiserver's): after it, the controller-manager takes ~3 min, the
# scheduler under 1.
#
#   hack/testenv/kube-component.sh COMPONENT [VERSION]   # prints the binary's path
#
# The build happens in a throwaway module that requires k8s.io/kubernetes and
# replaces every staging module it points at with the published v0.X.Y of the
# same release. It has its own GOCACHE so that cleaning the shared cache
# cannot break it mid-build. Never `go mod tidy` there: tidy resolves
# test-only modules the proxy refuses.
set -euo pipefail

COMP="${1:?component: kube-apiserver, kube-controller-manager, kube-scheduler or kubelet}"
case "$COMP" in
kube-apiserver | kube-controller-manager | kube-scheduler | kubelet) ;;
*) echo "unknown component $COMP" >&2; exit 2 ;;
esac
VER="${2:-${KUBE_VERSION:-v1.35.4}}"
ROOT="${SETPOINT_TESTENV:-${XDG_CACHE_HOME:-$HOME/.cache}/setpoint-testenv}"
OUT="$ROOT/$COMP/$VER"
BIN="$OUT/$COMP"

if [ -x "$BIN" ] && "$BIN" --version 2>/dev/null | grep -qx "Kubernetes $VER"; then
	echo "$BIN"
	exit 0
fi

minor="${VER#v1.}"; minor="${minor%%.*}"
staging="v0.${VER#v1.}"
work="$OUT/build"
rm -rf "$work"
mkdir -p "$work"
# One build cache for every component of a version: they share most of
# their packages.
export GOCACHE="$ROOT/kube-apiserver/$VER/gocache"
export GOFLAGS=-mod=mod
cd "$work"

echo "building $COMP $VER from source (minutes, once per version)" >&2
gomod="$(go mod download -json "k8s.io/kubernetes@$VER" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
[ -f "$gomod" ] || { echo "no go.mod for k8s.io/kubernetes@$VER" >&2; exit 1; }
goline="$(grep -m1 '^go ' "$gomod")"

{
	echo "module setpoint.test/$COMP-build"
	echo
	echo "$goline"
	echo
	echo "require k8s.io/kubernetes $VER"
	echo
	# Every `k8s.io/<m> => ./staging/...` line of kubernetes' own go.mod.
	grep -E '^[[:space:]]*k8s\.io/[a-z0-9-]+ => \./staging/' "$gomod" |
		awk -v v="$staging" '{print "replace " $1 " => " $1 " " v}'
} >go.mod

n="$(grep -c '^replace ' go.mod)"
[ "$n" -gt 20 ] || { echo "expected the staging replaces, found $n" >&2; exit 1; }

go get "k8s.io/kubernetes/cmd/$COMP@$VER" >&2
CGO_ENABLED=0 go build -trimpath \
	-ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$VER -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean" \
	-o "$BIN.tmp" "k8s.io/kubernetes/cmd/$COMP" >&2
mv "$BIN.tmp" "$BIN"
rm -rf "$work"
"$BIN" --version >&2
echo "$BIN"
