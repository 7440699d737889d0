# setpoint — see README.md. Every target works on a fresh machine with Go;
# `make testenv` installs the tools the tests drive (idempotent).

GO        ?= go
GOBIN     := $(shell $(GO) env GOPATH)/bin
CUE_VER   := $(shell $(GO) list -m -f '{{.Version}}' cuelang.org/go)
STATICCHECK_VER := v0.8.2
# kube-apiserver that `make testenv` builds and internal/kubetest runs.
KUBE_VERSION := v1.35.4
# etcd and kwok of the full control plane, and containerd of its real
# node (internal/kubetest); the constants there must match.
ETCD_VERSION := v3.6.5
KWOK_VERSION := v0.8.0
CONTAINERD_VERSION := v2.4.2
METRICS_SERVER_VERSION := v0.8.0
BIN       := bin/setpoint
PKGS      := ./...
FUZZTIME  ?= 60s

export PATH := $(GOBIN):$(PATH)
export SETPOINT_KUBE_VERSION := $(KUBE_VERSION)

.PHONY: all build test test-short bench bench-control scenarios image playground playground-node schemas docs lint fmt demo testenv fuzz clean proto bpf

all: build

build:
	$(GO) build -trimpath -o $(BIN) ./cmd/setpoint

# All tests, including the cue CLI parity test and the fuzz seed corpus;
# then the engine (watch, state, gate included) and the provider plugin
# packages again under the race detector.
RACE_PKGS := ./engine/... ./providers/plugin/...
test: testenv
	$(GO) test -count=1 -timeout 25m $(PKGS)
	$(GO) test -race -count=1 $(RACE_PKGS)

test-short:
	$(GO) test -short $(PKGS)

# Go benchmarks plus whole-process figures (CPU, peak RSS, and `cue vet` on
# the same files), then one table of the figures against their goals
# (hack/benchgoals); see docs/benchmarks.md.
bench: testenv build
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
	bash hack/bench-validate.sh $(BIN)
	$(GO) run ./hack/benchgoals -bin $(BIN)

# NFR control against its goals: every scenario of testdata/scenarios for
# seeds 1–5, each with --baseline (the HPA alone, the cheapest fixed count
# as good, the hindsight oracle); one table, printed and written into
# docs/benchmarks.md. Add -strict to fail on a missed goal.
bench-control: build
	$(GO) run ./hack/benchcontrol -bin $(BIN) -dir testdata/scenarios -seeds 5 -doc docs/benchmarks.md

# The container image, with no Docker daemon and no base image to pull: a
# static binary per platform on a layer made here, under one OCI index
# tagged with VERSION, written as an OCI layout (push it with
# `go run ./hack/image -version VERSION -push REGISTRY/REPO`).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
image:
	$(GO) run ./hack/image -version $(VERSION) -out bin/image

# A control plane to try setpoint against (etcd, kube-apiserver,
# controller-manager, scheduler, kwok, metrics-server, Prometheus) with two
# example workloads under made-up traffic; writes playground/kubeconfig and
# playground/specs, and runs until Ctrl-C. See docs/install.md.
playground: testenv build
	$(GO) run ./hack/playground -dir playground

# The same with a real node (containerd, runc, a kubelet): pods run, and
# setpoint installs in the cluster from deploy/ (playground/overlay).
playground-node: testenv build
	$(GO) run ./hack/playground -dir playground -real-node

# Generated reference: the CLI's pages (docs/cli), from the commands; each
# kind's field reference and example (docs/kinds), from the CUE schemas and
# specs/ (the hand-written text around the markers is kept).
docs:
	$(GO) run ./cmd/setpoint internal cli-docs docs/cli
	$(GO) run ./hack/refdocs -docs docs/kinds -specs specs

# JSON Schemas of every spec kind, generated from the CUE schemas, for
# editors (yaml-language-server) and CI; a test and CI check them current.
schemas:
	$(GO) run ./hack/schemas -out schemas

# The scenario suite, written again from hack/scenarios (the same files).
scenarios:
	$(GO) run ./hack/scenarios -out testdata/scenarios -specs specs

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $$($(GO) list $(PKGS) | grep -v /engine/signals/embedded$$)
	@# Prometheus's chunkenc.Iterator has a Seek(int64) that vet mistakes for io.Seeker.
	$(GO) vet -stdmethods=false ./engine/signals/embedded
	@command -v staticcheck >/dev/null 2>&1 || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VER)
	staticcheck $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

# The main job on the shipped example: validate, then the reconcile loop on
# virtual time against the sim world over the whole shipped trace, printing
# applies as they happen and a summary.
demo: build
	./$(BIN) validate specs/
	./$(BIN) sim --baseline specs/

# Tools the tests run for real: the cue CLI at the library's version (for
# the `cue vet` parity test); etcd $(ETCD_VERSION), kube-apiserver,
# kube-controller-manager, kube-scheduler and kubelet $(KUBE_VERSION), kwok
# $(KWOK_VERSION) and containerd $(CONTAINERD_VERSION), built from source
# once and cached by version, for internal/kubetest's API server, full
# control plane and real node; Debian's prometheus for internal/promtest,
# and its runc and CNI plugins for the real node. apt waits for a dpkg
# lock another process holds rather than fail.
testenv:
	@if ! "$(GOBIN)/cue" version 2>/dev/null | grep -q "$(CUE_VER)"; then \
		echo "installing cue $(CUE_VER)"; $(GO) install cuelang.org/go/cmd/cue@$(CUE_VER); fi
	@if ! command -v prometheus >/dev/null 2>&1; then \
		echo "installing prometheus"; export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -qq -o DPkg::Lock::Timeout=600 prometheus >/dev/null || \
		{ apt-get update -qq -o DPkg::Lock::Timeout=600 && apt-get install -y -qq -o DPkg::Lock::Timeout=600 prometheus >/dev/null; }; fi
	@if ! command -v runc >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1 || [ ! -x /usr/lib/cni/bridge ]; then \
		echo "installing runc, containernetworking-plugins and iproute2"; export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -qq -o DPkg::Lock::Timeout=600 runc containernetworking-plugins iproute2 >/dev/null || \
		{ apt-get update -qq -o DPkg::Lock::Timeout=600 && \
		  apt-get install -y -qq -o DPkg::Lock::Timeout=600 runc containernetworking-plugins iproute2 >/dev/null; }; fi
	@bash hack/testenv/etcd.sh $(ETCD_VERSION) >/dev/null
	@bash hack/testenv/containerd.sh $(CONTAINERD_VERSION) >/dev/null
	@for c in kube-apiserver kube-controller-manager kube-scheduler kubelet; do \
		bash hack/testenv/kube-component.sh $$c $(KUBE_VERSION) >/dev/null || exit 1; done
	@bash hack/testenv/go-tool.sh kwok sigs.k8s.io/kwok/cmd/kwok $(KWOK_VERSION) >/dev/null
	@bash hack/testenv/go-tool.sh metrics-server sigs.k8s.io/metrics-server/cmd/metrics-server $(METRICS_SERVER_VERSION) >/dev/null

# Every fuzz target for FUZZTIME each (make test runs their seed corpora).
FUZZ_TARGETS := ./cue/load:FuzzLoad ./providers/sim:FuzzReadTrace ./providers/sim:FuzzLoadChanges \
	./providers/plugin:FuzzClientChecks ./engine/plan:FuzzParse ./engine/state:FuzzShard
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		echo "fuzzing $${t#*:} in $${t%%:*} for $(FUZZTIME)"; \
		$(GO) test $${t%%:*} -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) -parallel 1 || exit 1; \
	done

clean:
	rm -rf bin

# Regenerate the provider protocol's Go code (protoc from Debian's
# protobuf-compiler, the Go plugins at the module's versions).
PROTOC_GEN_GO_VER := $(shell $(GO) list -m -f '{{.Version}}' google.golang.org/protobuf)
PROTOC_GEN_GO_GRPC_VER := v1.5.1
proto:
	@command -v protoc >/dev/null || { echo "protoc is missing: apt-get install protobuf-compiler"; exit 1; }
	@"$(GOBIN)/protoc-gen-go" --version 2>/dev/null | grep -q "$(PROTOC_GEN_GO_VER)" || $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VER)
	@"$(GOBIN)/protoc-gen-go-grpc" --version 2>/dev/null | grep -q "$(PROTOC_GEN_GO_GRPC_VER:v%=%)" || $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VER)
	protoc --plugin="$(GOBIN)/protoc-gen-go" --plugin="$(GOBIN)/protoc-gen-go-grpc" \
		--go_out=. --go_opt=module=github.com/setpoint-dev/setpoint \
		--go-grpc_out=. --go-grpc_opt=module=github.com/setpoint-dev/setpoint \
		providers/proto/provider.proto

# Regenerate the dataplane's bpf2go Go and object (Debian's clang, llvm and
# libbpf-dev; bpf2go is a tool of the module). Objects are committed, so
# builds and tests need no clang; CI regenerates and fails on a difference.
bpf:
	@command -v clang >/dev/null || { echo "clang is missing: apt-get install clang llvm libbpf-dev"; exit 1; }
	cd bpf/dataplane && $(GO) generate ./...
