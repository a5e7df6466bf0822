//go:build tools

// Package attacher pins kubernetes-csi's external-attacher. It is a module
// of its own, beside hack/csi-sidecars: external-attacher v4.13.0 needs
// k8s.io/* v0.37, external-provisioner v5.3.0 replaces them with v0.33.
package attacher

import (
	_ "github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher"
)
