//go:build tools

// Package kubeadm pins kubeadm, built by hack/build-kubeadm.sh for the
// kubeadm join test (hack/test-join.sh). It is a module of its own, beside
// hack/controlplane rather than in it, so that kubeadm's extra dependencies
// never change the control plane's go.sum and with it the control plane's
// cache key (a cold rebuild of kube-apiserver and the rest).
package kubeadm

import _ "k8s.io/kubernetes/cmd/kubeadm"
