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
