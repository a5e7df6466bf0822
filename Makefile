# nodeagent: `make run` runs the agent against a local control plane and
# containerd; `make test` runs every test. Both need root (containerd,
# cgroups, nspawn) and install what they need themselves.

SHELL := /bin/bash
# The same version string as the packages (hack/package.sh): dpkg and rpm need a leading digit.
VERSION ?= $(shell bash -c 'source <(sed -n "/^version() {/,/^}/p" hack/package.sh); version')
BIN := _output/bin
# hack/build.sh's flag set (no cgo, -trimpath, its tags) for every go command
# of a make run: go vet and go test reuse the packages the build compiled, so a
# cold `make test` compiles each package once (issue 33, docs/testing.md).
# The upstream programs have a flag set of their own (hack/upstream-go.sh).
export CGO_ENABLED := 0
export GOFLAGS := $(shell hack/build.sh --goenv | sed -n 's/^GOFLAGS=//p')

.PHONY: all build deps controlplane cluster-up cluster-down run test test-rotation test-unit \
	test-integration fuzz-smoke conformance conformance-features conformance-full lint clean fault-long soak test-vm sample-device-plugin \
	metrics-server csi-sidecars etcd kubelet bench-vs-kubelet multinode-deps test-multinode multinode-up

all: build

# The one build (hack/build.sh), the same as the packages': without cgo, with
# the tags that keep the linker's dead-code elimination on. hack/test-systemd.sh
# checks that the two are identical; `make lint` that nothing bypasses it.
build:
	NODEAGENT_VERSION=$(VERSION) hack/build.sh $(BIN)

deps:
	hack/ensure-deps.sh

# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl from the
# pinned k8s.io/kubernetes, and etcd 3.6 from its Go module (hack/build-etcd.sh).
controlplane: deps
	hack/build-controlplane.sh

# etcd alone (make controlplane builds it too): the local control plane's store.
etcd:
	hack/build-etcd.sh

# kubelet from the pinned k8s.io/kubernetes (cached), the baseline of
# hack/bench/vs-kubelet; not part of make test.
kubelet:
	hack/build-kubelet.sh

# nodeagent against kubelet on one machine, containerd and CNI, same run
# (docs/benchmarks.md); BENCH_ARGS go to the bench.
bench-vs-kubelet:
	hack/bench/vs-kubelet/vs-kubelet.sh $(BENCH_ARGS)

cluster-up: controlplane
	hack/localcluster.sh up

cluster-down:
	hack/localcluster.sh down

# Builds everything, starts the local control plane and containerd, runs the
# agent in the foreground; Ctrl-C stops it all.
run: build controlplane
	hack/run.sh

# Every test: unit, integration and e2e against one shared local cluster,
# the config fuzzer briefly, the upstream node conformance specs, and
# the package test under systemd-nspawn. The multi-node add-ons
# (multinode-deps), metrics-server and the CSI sidecars (csi-sidecars) are
# not prerequisites: the phases that use them (hack/test-multinode.sh; the
# kubectl top e2e test; the storage conformance specs and the StatefulSet
# e2e test) build them themselves beside other phases, so that a cold run
# does not compile CoreDNS, kube-proxy, metrics-server and the sidecars
# before the first test (docs/testing.md, "The budget").
test: build controlplane sample-device-plugin
	hack/test.sh

# The sample device plugin of the pinned k8s.io/kubernetes module, for the
# device plugin e2e test (cached like the control plane).
sample-device-plugin:
	hack/build-sample-device-plugin.sh

# metrics-server from its Go module (hack/metrics-server), for the kubectl
# top e2e test (cached like the sample device plugin).
metrics-server:
	hack/build-metrics-server.sh

# kubernetes-csi's external-provisioner, external-resizer and
# external-attacher from their Go modules (hack/csi-sidecars), for e2e
# TestCSIStatefulSet, TestCSIAttachRequired, TestCSIMigrationAttach and the
# storage conformance specs (cached like metrics-server).
csi-sidecars:
	hack/build-csi-sidecars.sh

# The multi-node cluster's add-ons from their Go modules (cached like the
# control plane): kube-proxy (hack/kube-proxy), CoreDNS (hack/coredns), the
# pod network's route agent (hack/routeagent). docs/multinode.md.
multinode-deps: controlplane
	hack/build-kube-proxy.sh >/dev/null
	hack/build-coredns.sh >/dev/null
	go build -ldflags='-s -w' -o $(BIN)/routeagent ./hack/routeagent

# A 3-node cluster of nodeagent nodes with the add-ons, left running in
# _output/multinode (stop it with `_output/bin/localcluster down --dir _output/multinode`).
multinode-up: build multinode-deps
	go build -o $(BIN)/localcluster ./hack/localcluster
	$(BIN)/localcluster up --dir _output/multinode --nodes 3 --cluster-cidr 10.247.0.0/16

# The multi-node short form alone (make test runs it beside other phases).
test-multinode: build multinode-deps
	hack/test-multinode.sh

# The upstream node conformance specs alone, against the running cluster in
# $NODEAGENT_CLUSTER_DIR (docs/conformance.md).
conformance: build
	hack/conformance.sh

# The upstream specs of the default-on pod features (in-place resize, pod
# generation; then user namespaces on a private containerd 2.x with runc
# 1.5; docs/conformance.md) against the running cluster in
# $NODEAGENT_CLUSTER_DIR: about 12 minutes. `make test` runs a short form.
conformance-features: build
	hack/conformance.sh --set=features
	hack/conformance.sh --set=userns

# Every upstream [Conformance] spec (test/e2e, all SIGs; the [Serial]
# ones after the others) against a 3-node cluster of nodeagent nodes with
# the add-ons that the run starts and stops (docs/conformance.md): hours
# on a loaded 2-core machine. Not in make test (its short form is
# hack/test-multinode.sh).
conformance-full: build multinode-deps
	hack/conformance.sh --set=full

# The fault suite (e2e/fault, docs/reliability.md) with the issue's full
# durations (~18 min in its one measured run, its own cluster; the go test
# timeout is 60 min); `make test` runs the short form.
fault-long: build controlplane
	NODEAGENT_FAULT_LONG=1 NODEAGENT_BIN=$(CURDIR)/$(BIN)/nodeagent go test -count=1 -v -parallel 4 -timeout 60m ./e2e/fault

# The randomized soak (issue 15, docs/benchmarks.md): faults at random for
# SOAK_DURATION on its own cluster; SOAK_SEED replays a schedule. Not in CI.
SOAK_DURATION ?= 2h
soak: build controlplane
	NODEAGENT_SOAK=$(SOAK_DURATION) NODEAGENT_SOAK_SEED=$(SOAK_SEED) NODEAGENT_BIN=$(CURDIR)/$(BIN)/nodeagent \
		go test -count=1 -v -timeout 0 -run '^TestSoak$$' ./e2e/fault 2>&1 | tee _output/soak.log; exit $${PIPESTATUS[0]}

# The cgroup v2 virtual machine test's long form (hack/test-vm.sh,
# docs/vm.md; `make test` runs `hack/test-vm.sh --short`): a Debian 12 guest
# under qemu (TCG), the agent's .deb as its systemd unit, pods' cgroup v2
# limits, OOMKilled, logs/exec, the PLEG's cgroup v2 source, swap; then the
# long form's own items: the node set's NodeConformance specs against the
# guest's node and the agent's unit under MemoryHigh=32M holding up to 100
# pods for 10 minutes (hack/vm/long.sh). Then the short form again with
# cgroupDriver: cgroupfs (kubelet's /kubepods layout on cgroup v2). Its own
# control plane, in a network namespace.
test-vm: controlplane
	hack/test-vm.sh
	hack/test-vm.sh --short --cgroup-driver=cgroupfs

# Quick loop while coding: no cluster, tests that need one are skipped.
# The long form of the client certificate rotation test: a cluster of its
# own signing 10-minute certificates, at least 3 rotations in 30 minutes
# with no missed Lease window (e2e/certs_test.go).
test-rotation: build controlplane
	NODEAGENT_ROTATION_LONG=1 go test -count=1 -timeout 45m -run '^TestClientCertificateRotation$$' -v ./e2e

test-unit:
	NODEAGENT_SKIP_CLUSTER=1 go test ./...

fuzz-smoke:
	go test ./config -run='^$$' -fuzz=FuzzDecode -fuzztime=10s -fuzzminimizetime=200x

# gofmt, go vet, and the build checks: every build goes through hack/build.sh
# and the linker's dead-code elimination of methods is on (hack/check-build.sh).
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet ./...
	hack/check-build.sh

clean:
	-hack/localcluster.sh down 2>/dev/null
	rm -rf _output dist

include packaging/packaging.mk
