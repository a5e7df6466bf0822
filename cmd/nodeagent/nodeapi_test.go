package main

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type managerPods struct{ pods []*v1.Pod }

func (m managerPods) GetPods() []*v1.Pod { return m.pods }
func (m managerPods) GetPodByName(ns, name string) (*v1.Pod, bool) {
	for _, p := range m.pods {
		if p.Namespace == ns && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// The node API reads pods from the pod manager once it can tell them;
// before that (and from a manager that cannot) from the runtime, which
// here is not connected: no pods, no panic.
func TestAPIPodsUsesTheManagerWhenItCan(t *testing.T) {
	a := &agent{}
	a.apiPods.a = a
	if pods := a.apiPods.GetPods(); len(pods) != 0 {
		t.Fatalf("without runtime or manager: %v", pods)
	}
	a.apiPods.use(struct{}{}) // a manager without GetPods/GetPodByName
	if _, ok := a.apiPods.GetPodByName("default", "web"); ok {
		t.Fatal("found a pod without a source")
	}
	web := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "u1"}}
	a.apiPods.use(managerPods{pods: []*v1.Pod{web}})
	if p, ok := a.apiPods.GetPodByName("default", "web"); !ok || p.UID != "u1" {
		t.Fatalf("GetPodByName = %v, %v", p, ok)
	}
	if pods := a.apiPods.GetPods(); len(pods) != 1 {
		t.Fatalf("GetPods = %v", pods)
	}
}
