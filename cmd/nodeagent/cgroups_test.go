package main

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeagent/nodeagent/config"
)

func TestCgroupRootFor(t *testing.T) {
	for _, tc := range []struct {
		desc, ns, driver, root string
		want                   string // cgroupfs path of kubepods' parent
	}{
		{"k8s.io: kubelet's paths", "k8s.io", "cgroupfs", "", "/"},
		{"another namespace: a root of its own", "e2e-n1", "cgroupfs", "", "/nodeagent-e2e-n1"},
		{"cgroupRoot wins", "e2e-n1", "cgroupfs", "/custom", "/custom"},
		{"systemd slice root", "k8s.io", "systemd", "/custom.slice", "/custom"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := config.Default()
			c.ContainerRuntimeNamespace, c.CgroupDriver, c.CgroupRoot = tc.ns, tc.driver, tc.root
			got, err := cgroupRootFor(c)
			if err != nil {
				t.Fatal(err)
			}
			if got.ToCgroupfs() != tc.want {
				t.Errorf("root %s, want %s", got.ToCgroupfs(), tc.want)
			}
		})
	}
}

func TestAllocatableForPods(t *testing.T) {
	capacity := v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")}
	got := allocatableForPods(capacity, map[string]string{"cpu": "500m", "memory": "1Gi"}, map[string]string{"memory": "9Gi"})
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
