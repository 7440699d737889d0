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
for mode in shared unique; do
	for n in 1000 10000; do
		flag=""; [ $mode = unique ] && flag=-unique
		"$tmp/gendocs" -n $n $flag -out "$tmp/$mode$n"
		printf 'setpoint validate, %5d %s documents: ' $n $mode
		"$tmp/measure" "$bin" validate "$tmp/$mode$n"
		printf 'cue vet -c,        %5d %s documents: ' $n $mode
		"$tmp/measure" "$cue" vet -c -d '#Spec' "$tmp"/schema/*.cue "$tmp/$mode$n"/nfr-*.yaml
	done
done
