package cm

import (
	"reflect"
	"testing"

	"github.com/opencontainers/cgroups"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestPageSizeBytes(t *testing.T) {
	for s, want := range map[string]int64{"2MB": 2 << 20, "1GB": 1 << 30, "64KB": 64 << 10, "16GB": 16 << 30} {
		if got, err := PageSizeBytes(s); err != nil || got != want {
			t.Errorf("PageSizeBytes(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "MB", "2Mi", "0MB", "-2MB", "2.5MB", "02MB"} {
		if got, err := PageSizeBytes(s); err == nil {
			t.Errorf("PageSizeBytes(%q) = %d, want an error", s, got)
		}
	}
}

func TestHugePageLimitsFromPod(t *testing.T) {
	q := resource.MustParse
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "i", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{"hugepages-2Mi": q("8Mi"), v1.ResourceMemory: q("10Mi")},
			Limits:   v1.ResourceList{"hugepages-2Mi": q("8Mi"), v1.ResourceMemory: q("10Mi")}}}},
		Containers: []v1.Container{
			{Name: "a", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{"hugepages-2Mi": q("4Mi"), "hugepages-1Gi": q("1Gi"), v1.ResourceCPU: q("1")},
				Limits:   v1.ResourceList{"hugepages-2Mi": q("4Mi"), "hugepages-1Gi": q("1Gi"), v1.ResourceCPU: q("1")}}},
			{Name: "b", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{"hugepages-2Mi": q("2Mi"), v1.ResourceMemory: q("1Mi")},
				Limits:   v1.ResourceList{"hugepages-2Mi": q("2Mi"), v1.ResourceMemory: q("1Mi")}}},
		}}}
	// Requests as the scheduler sums them: the containers' 6Mi is below
	// the init container's 8Mi.
	rc := PodResourceConfig(pod, 0)
	want := map[int64]int64{2 << 20: 8 << 20, 1 << 30: 1 << 30}
	if !reflect.DeepEqual(rc.HugePageLimit, want) {
		t.Errorf("pod hugetlb limits %v, want %v", rc.HugePageLimit, want)
	}
	// A pod without huge pages: an empty map (every size limited to 0), not nil.
	if rc := PodResourceConfig(&v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}, 0); rc.HugePageLimit == nil || len(rc.HugePageLimit) != 0 {
		t.Errorf("best-effort pod hugetlb limits %v, want an empty map", rc.HugePageLimit)
	}
	alloc := v1.ResourceList{v1.ResourceCPU: q("2"), "hugepages-2Mi": q("20Mi"), "hugepages-1Gi": q("0")}
	if rc := NodeAllocatableConfig(alloc, false); rc.HugePageLimit != nil {
		t.Errorf("kubepods unenforced: hugetlb %v", rc.HugePageLimit)
	}
	if rc := NodeAllocatableConfig(alloc, true); !reflect.DeepEqual(rc.HugePageLimit, map[int64]int64{2 << 20: 20 << 20, 1 << 30: 0}) {
		t.Errorf("kubepods enforced: hugetlb %v", rc.HugePageLimit)
	}
}

func TestHugetlbResources(t *testing.T) {
	sizes := []string{"1GB", "2MB"}
	lim := func(r *cgroups.Resources) map[string]uint64 {
		if r.HugetlbLimit == nil {
			return nil
		}
		m := map[string]uint64{}
		for _, l := range r.HugetlbLimit {
			m[l.Pagesize] = l.Limit
		}
		return m
	}
	for _, tc := range []struct {
		desc  string
		rc    ResourceConfig
		sizes []string
		want  map[string]uint64
	}{
		{"requested size set, the others 0", ResourceConfig{HugePageLimit: map[int64]int64{2 << 20: 4 << 20}}, sizes, map[string]uint64{"2MB": 4 << 20, "1GB": 0}},
		{"no huge pages: every size 0", ResourceConfig{HugePageLimit: map[int64]int64{}}, sizes, map[string]uint64{"2MB": 0, "1GB": 0}},
		{"nil: left as is", ResourceConfig{}, sizes, nil},
		{"no hugetlb controller: nothing", ResourceConfig{HugePageLimit: map[int64]int64{2 << 20: 4 << 20}}, nil, nil},
		{"a size the host lacks is dropped", ResourceConfig{HugePageLimit: map[int64]int64{16 << 30: 16 << 30}}, []string{"2MB"}, map[string]uint64{"2MB": 0}},
		{"QoS cgroups: unbounded", ResourceConfig{HugePageLimit: UnboundedHugePages(sizes)}, sizes, map[string]uint64{"2MB": 1 << 62, "1GB": 1 << 62}},
	} {
		if got := lim(toResources(tc.rc, false, tc.sizes)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.desc, got, tc.want)
		}
	}
}
