package cm

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/kubetypes"
)

func TestSwapOn(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"", false},
		{"Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n", false},
		{"Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/swapfile                               file\t\t65532\t\t0\t\t-2\n", true},
	} {
		if got := SwapOn([]byte(tc.in)); got != tc.want {
			t.Errorf("SwapOn(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestSwapControllerAvailable(t *testing.T) {
	mnt := t.TempDir()
	if SwapControllerAvailable(mnt, false, nil) || SwapControllerAvailable(mnt, true, []byte("0::/system.slice/nodeagent.service\n")) {
		t.Fatal("available without the files")
	}
	if err := os.MkdirAll(filepath.Join(mnt, "memory"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "memory", "memory.memsw.limit_in_bytes"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !SwapControllerAvailable(mnt, false, nil) {
		t.Error("v1: memsw present but not available")
	}
	self := filepath.Join(mnt, "system.slice", "nodeagent.service")
	if err := os.MkdirAll(self, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(self, "memory.swap.max"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !SwapControllerAvailable(mnt, true, []byte("0::/system.slice/nodeagent.service\n")) {
		t.Error("v2: memory.swap.max in the agent's cgroup but not available")
	}
	if SwapControllerAvailable(mnt, true, []byte("0::/\n")) {
		t.Error("v2: the root has no memory.swap.max, as kubelet finds")
	}
}

// kubelet's per-container swap decision (kuberuntime's
// GetContainerSwapBehavior and calcSwapForBurstablePods), case by case.
func TestContainerSwapMax(t *testing.T) {
	const gi = int64(1) << 30
	res := func(req, lim string) v1.ResourceRequirements {
		r := v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}
		if req != "" {
			r.Requests[v1.ResourceMemory] = resource.MustParse(req)
		}
		if lim != "" {
			r.Limits[v1.ResourceMemory] = resource.MustParse(lim)
		}
		return r
	}
	pod := func(qos v1.PodQOSClass, r v1.ResourceRequirements) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: r}}},
			Status:     v1.PodStatus{QOSClass: qos},
		}
	}
	limited := Swap{Controller: true, Unified: true, Limited: true, Capacity: 2 * gi}
	zero, quarter := int64(0), int64(gi/2) // 1Gi of 4Gi memory × 2Gi swap
	critical := pod(v1.PodQOSBurstable, res("1Gi", "2Gi"))
	critical.Annotations = map[string]string{kubetypes.AnnotationConfigSource: kubetypes.SourceFile}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		s    Swap
		want *int64
	}{
		{"no controller: nothing set", pod(v1.PodQOSBurstable, res("1Gi", "2Gi")), Swap{Unified: true, Limited: true, Capacity: 2 * gi}, nil},
		{"NoSwap v2", pod(v1.PodQOSBurstable, res("1Gi", "2Gi")), Swap{Controller: true, Unified: true, Capacity: 2 * gi}, &zero},
		{"v2 without swap on the host: nothing set", pod(v1.PodQOSBurstable, res("1Gi", "2Gi")), Swap{Controller: true, Unified: true}, nil},
		{"NoSwap v1", pod(v1.PodQOSBurstable, res("1Gi", "2Gi")), Swap{Controller: true}, &zero},
		{"LimitedSwap on v1 is NoSwap", pod(v1.PodQOSBurstable, res("1Gi", "2Gi")), Swap{Controller: true, Limited: true, Capacity: 2 * gi}, &zero},
		{"LimitedSwap Burstable", pod(v1.PodQOSBurstable, res("1Gi", "2Gi")), limited, &quarter},
		{"LimitedSwap Burstable, request without limit", pod(v1.PodQOSBurstable, res("1Gi", "")), limited, &quarter},
		{"LimitedSwap Burstable, request equals limit", pod(v1.PodQOSBurstable, res("1Gi", "1Gi")), limited, &zero},
		{"LimitedSwap Burstable container without memory", pod(v1.PodQOSBurstable, res("", "")), limited, &zero},
		{"LimitedSwap Guaranteed", pod(v1.PodQOSGuaranteed, res("1Gi", "2Gi")), limited, &zero},
		{"LimitedSwap BestEffort", pod(v1.PodQOSBestEffort, res("", "")), limited, &zero},
		{"LimitedSwap critical (static) pod", critical, limited, &zero},
		{"LimitedSwap request above node memory", pod(v1.PodQOSBurstable, res("5Gi", "6Gi")), limited, &zero},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ContainerSwapMax(tc.pod, &tc.pod.Spec.Containers[0], 4*gi, tc.s)
			switch {
			case tc.want == nil && got != nil:
				t.Errorf("got %d, want nothing set", *got)
			case tc.want != nil && (got == nil || *got != *tc.want):
				t.Errorf("got %v, want %d", got, *tc.want)
			}
		})
	}
}
