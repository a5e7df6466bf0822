//go:build tools

// Package controlplane pins the Kubernetes control-plane binaries used by the
// local test cluster (hack/cluster.sh), and the programs of the e2e test
// images and the ginkgo CLI used by hack/conformance.sh. It is its own module
// so that the product's go.mod never depends on k8s.io/kubernetes.
package controlplane

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"

	// kubeadm, for the kubeadm join test (hack/build-kubeadm.sh).
	_ "k8s.io/kubernetes/cmd/kubeadm"

	// The e2e test images' programs and the ginkgo CLI that runs the
	// conformance specs in parallel (hack/conformance.sh builds them).
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "k8s.io/kubernetes/test/images/agnhost"
	_ "k8s.io/kubernetes/test/images/nonewprivs"
)
