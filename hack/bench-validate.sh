#!/usr/bin/env bash
# Whole-process figures for `setpoint validate` on 1,000 and 10,000 small
# documents, and for `cue vet` on the same files (docs/benchmarks.md).
set -euo pipefail
bin=${1:-bin/setpoint}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/measure" ./hack/measure
go build -o "$tmp/gendocs" ./hack/gendocs
mkdir -p "$tmp/schema"
for f in cue/schema/*.cue; do cp "$f" "$tmp/schema/"; done
cue=$(go env GOPATH)/bin/cue
for n in 1000 10000; do
	"$tmp/gendocs" -n $n -out "$tmp/d$n"
	printf 'setpoint validate, %5d documents: ' $n
	"$tmp/measure" "$bin" validate "$tmp/d$n"
	printf 'cue vet -c,        %5d documents: ' $n
	"$tmp/measure" "$cue" vet -c -d '#Spec' "$tmp"/schema/*.cue "$tmp/d$n"/nfr-*.yaml
done
