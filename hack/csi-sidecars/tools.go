//go:build tools

// Package csisidecars pins kubernetes-csi's external-provisioner and
// external-resizer.
package csisidecars

import (
	_ "github.com/kubernetes-csi/external-provisioner/v5/cmd/csi-provisioner"
	_ "github.com/kubernetes-csi/external-resizer/cmd/csi-resizer"
)
