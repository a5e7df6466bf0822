//go:build tools

// Package etcd pins the etcd server the local control plane runs
// (internal/testing/localcluster), built by hack/build-etcd.sh. etcd 3.6.4
// is the version Kubernetes v1.34.4 (hack/controlplane) is built and tested
// against (its go.etcd.io/etcd client modules and kubeadm's default etcd
// image). It is a module of its own, as hack/kubeadm is, so that adding it
// never changes hack/controlplane's go.mod and with it the cache keys of the
// control plane, the conformance suite and the e2e images; its dependencies
// are etcd v3.6.4's own, as in the upstream release.
package etcd

import (
	_ "go.etcd.io/etcd/server/v3"
)
