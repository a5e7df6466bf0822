//go:build tools

// Package kubeproxy pins kube-proxy, built by hack/build-kube-proxy.sh for
// the multi-node cluster's add-ons (docs/multinode.md). A module of its own,
// beside hack/controlplane rather than in it (as hack/kubeadm), so that
// kube-proxy's extra dependencies (netlink, knftables, ipvs) never change
// the control plane's go.sum and with it the control plane's cache key.
package kubeproxy

import _ "k8s.io/kubernetes/cmd/kube-proxy"
