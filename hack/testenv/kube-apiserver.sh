#!/usr/bin/env bash
# Builds kube-apiserver from source and caches it by version (see
# kube-component.sh); prints the binary's path.
#
#   hack/testenv/kube-apiserver.sh [VERSION]
exec "$(dirname "$0")/kube-component.sh" kube-apiserver "$@"
