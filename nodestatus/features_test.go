package nodestatus

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestNodeFeatures(t *testing.T) {
	node := &v1.Node{}
	if err := NodeFeatures()(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	f := node.Status.Features
	if f == nil || f.SupplementalGroupsPolicy == nil || !*f.SupplementalGroupsPolicy {
		t.Errorf("status.features = %+v, want supplementalGroupsPolicy true", f)
	}
}

// status.runtimeHandlers is set from the handlers' answer, and left as it
// is before the runtime was asked.
func TestRuntimeHandlersSetter(t *testing.T) {
	node := &v1.Node{}
	var hs []v1.NodeRuntimeHandler
	set := RuntimeHandlers(func() []v1.NodeRuntimeHandler { return hs })
	_ = set(context.Background(), node)
	if node.Status.RuntimeHandlers != nil {
		t.Fatalf("set before the runtime answered: %+v", node.Status.RuntimeHandlers)
	}
	no, yes := false, true
	hs = []v1.NodeRuntimeHandler{{Name: "", Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: &no, UserNamespaces: &yes}}}
	_ = set(context.Background(), node)
	if len(node.Status.RuntimeHandlers) != 1 || !*node.Status.RuntimeHandlers[0].Features.UserNamespaces {
		t.Errorf("runtimeHandlers %+v", node.Status.RuntimeHandlers)
	}
}
