package nodestatus

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

// NodeFeatures sets status.features as kubelet 1.34 does (its NodeFeatures
// setter, SupplementalGroupsPolicy being on by default):
// supplementalGroupsPolicy is true because the agent applies a pod's
// securityContext.supplementalGroupsPolicy itself (Strict leaves out the
// groups of the image's /etc/group), whatever the runtime; the API
// server's NodeRestriction and the scheduler look at it before they let a
// Strict pod onto the node.
func NodeFeatures() Setter {
	return func(_ context.Context, node *v1.Node) error {
		supported := true
		node.Status.Features = &v1.NodeFeatures{SupplementalGroupsPolicy: &supported}
		return nil
	}
}

// RuntimeHandlers sets status.runtimeHandlers as kubelet 1.34 does (its
// setter of that name, UserNamespacesSupport being on): one entry per
// runtime handler ("" for the default runtime, then RuntimeClass
// handlers) with whether it supports user namespaces and recursive
// read-only mounts. handlers must not block; nil leaves the field as it
// is (the runtime was not asked yet).
func RuntimeHandlers(handlers func() []v1.NodeRuntimeHandler) Setter { // Options.RuntimeHandlers
	return func(_ context.Context, node *v1.Node) error {
		if hs := handlers(); hs != nil {
			node.Status.RuntimeHandlers = hs
		}
		return nil
	}
}
