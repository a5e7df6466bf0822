//go:build tools

// Package controlplane pins the Kubernetes control-plane binaries used by the
// local test cluster (hack/cluster.sh). It is its own module so that the
// product's go.mod never depends on k8s.io/kubernetes.
package controlplane

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
