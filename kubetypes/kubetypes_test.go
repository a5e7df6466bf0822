package kubetypes

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIsCriticalPod(t *testing.T) {
	prio := func(p int32) *int32 { return &p }
	for _, tc := range []struct {
		name string
		pod  v1.Pod
		want bool
	}{
		{"no priority", v1.Pod{}, false},
		{"just below", v1.Pod{Spec: v1.PodSpec{Priority: prio(SystemCriticalPriority - 1)}}, false},
		{"cluster-critical", v1.Pod{Spec: v1.PodSpec{Priority: prio(SystemCriticalPriority)}}, true},
		{"node-critical", v1.Pod{Spec: v1.PodSpec{Priority: prio(SystemCriticalPriority + 1000)}}, true},
		{"static", v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationConfigSource: SourceFile}}}, true},
		{"mirror", v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationConfigMirror: "h"}}}, true},
		{"from the API", v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationConfigSource: SourceAPI}}}, false},
	} {
		if got := IsCriticalPod(&tc.pod); got != tc.want {
			t.Errorf("%s: IsCriticalPod = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestIsExtendedResourceName(t *testing.T) {
	for name, want := range map[v1.ResourceName]bool{
		"example.com/resource":   true,
		"nvidia.com/gpu":         true,
		"cpu":                    false,
		"hugepages-2Mi":          false,
		"kubernetes.io/foo":      false,
		"requests.example.com/x": false,
		"example.com/bad name":   false,
	} {
		if got := IsExtendedResourceName(name); got != want {
			t.Errorf("IsExtendedResourceName(%q) = %v, want %v", name, got, want)
		}
	}
}
