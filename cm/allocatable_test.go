package cm

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestAllocatableForPods(t *testing.T) {
	capacity := v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")}
	got := AllocatableForPods(capacity, map[string]string{"cpu": "500m", "memory": "1Gi"}, map[string]string{"memory": "9Gi"})
	if q := got[v1.ResourceCPU]; q.MilliValue() != 3500 {
		t.Errorf("cpu %s, want 3500m", q.String())
	}
	if q := got[v1.ResourceMemory]; !q.IsZero() {
		t.Errorf("memory %s, want 0 (reservations beyond capacity)", q.String())
	}
	if q := capacity[v1.ResourceCPU]; q.Value() != 4 {
		t.Errorf("capacity changed: %s", q.String())
	}
}
