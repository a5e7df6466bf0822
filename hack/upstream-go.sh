# Sourced by every script that builds a program from hack/controlplane (the
# module that pins k8s.io/kubernetes): the control plane, kubeadm, the
# conformance suite and its images, the sample device plugin, kubelet (the
# benchmark's baseline), and the modules beside it: metrics-server, etcd.
# One flag set for all of them, so that a package they share (k8s.io/api,
# client-go, apimachinery, apiserver, gRPC...) is compiled once per cold
# build, not once per flag set (issue 33, docs/testing.md "Cold runs"):
# static (no cgo) as Kubernetes' release builds are, and -trimpath. The
# agent's own module has its flag set in hack/build.sh (the Makefile exports
# it to every go command of a make run).
export CGO_ENABLED=0
export GOFLAGS=-trimpath
# Part of every cache key of those programs: a cache built with other flags
# is not this one.
UPSTREAM_GO_FLAGSET="CGO_ENABLED=$CGO_ENABLED GOFLAGS=$GOFLAGS"
