package resize

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func rr(cpuReq, cpuLim, memReq, memLim string) v1.ResourceRequirements {
	r := v1.ResourceRequirements{}
	add := func(l *v1.ResourceList, n v1.ResourceName, q string) {
		if q == "" {
			return
		}
		if *l == nil {
			*l = v1.ResourceList{}
		}
		(*l)[n] = resource.MustParse(q)
	}
	add(&r.Requests, v1.ResourceCPU, cpuReq)
	add(&r.Limits, v1.ResourceCPU, cpuLim)
	add(&r.Requests, v1.ResourceMemory, memReq)
	add(&r.Limits, v1.ResourceMemory, memLim)
	return r
}

func podWith(uid string, res ...v1.ResourceRequirements) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid)}}
	for i, r := range res {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: string(rune('a' + i)), Resources: r})
	}
	return p
}

func TestDecide(t *testing.T) {
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi")}
	guaranteed := rr("500m", "500m", "128Mi", "128Mi")
	other := podWith("other", rr("1", "1", "1Gi", "1Gi"))
	static := podWith("static", guaranteed)
	static.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	staticWant := podWith("static", rr("1", "1", "128Mi", "128Mi"))
	staticWant.Annotations = static.Annotations
	initPod := func(r v1.ResourceRequirements) *v1.Pod {
		p := podWith("init", guaranteed)
		p.Spec.InitContainers = []v1.Container{{Name: "i", Resources: r}}
		return p
	}
	podLevel := func(p *v1.Pod) *v1.Pod {
		p.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}}
		return p
	}
	for _, tc := range []struct {
		desc               string
		desired, allocated *v1.Pod
		others             []*v1.Pod
		want               Decision
	}{
		{"unchanged", podWith("p", guaranteed), podWith("p", guaranteed), nil, Decision{}},
		{"same value, other spelling", podWith("p", rr("0.5", "500m", "128Mi", "134217728")), podWith("p", guaranteed), nil, Decision{}},
		{"fits", podWith("p", rr("1", "1", "256Mi", "256Mi")), podWith("p", guaranteed), []*v1.Pod{other}, Decision{Resize: true, Allocate: true}},
		{"decrease fits", podWith("p", rr("250m", "250m", "64Mi", "64Mi")), podWith("p", guaranteed), []*v1.Pod{other}, Decision{Resize: true, Allocate: true}},
		{"pod-level resources: the API server's refusal", podLevel(podWith("p", rr("1", "1", "256Mi", "256Mi"))), podLevel(podWith("p", guaranteed)), nil,
			Decision{Resize: true, Reason: "Infeasible", Message: "pods with pod-level resources cannot be resized"}},
		{"pod-level resources unchanged: nothing to do", podLevel(podWith("p", guaranteed)), podLevel(podWith("p", guaranteed)), nil, Decision{}},
		{"static pod", staticWant, static, nil, Decision{Resize: true, Reason: "Infeasible", Message: "In-place resize of static-pods is not supported"}},
		{"qos change", podWith("p", rr("250m", "500m", "128Mi", "128Mi")), podWith("p", guaranteed), nil,
			Decision{Resize: true, Reason: "Infeasible", Message: "Pod QOS Class may not change as a result of resizing"}},
		{"more memory than the node", podWith("p", rr("500m", "500m", "5Gi", "5Gi")), podWith("p", guaranteed), nil,
			Decision{Resize: true, Reason: "Infeasible", Message: "Node didn't have enough capacity: memory, requested: 5368709120, capacity: 4294967296"}},
		{"more cpu than the node", podWith("p", rr("3", "3", "128Mi", "128Mi")), podWith("p", guaranteed), nil,
			Decision{Resize: true, Reason: "Infeasible", Message: "Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000"}},
		{"not next to the others", podWith("p", rr("1500m", "1500m", "128Mi", "128Mi")), podWith("p", guaranteed), []*v1.Pod{other},
			Decision{Resize: true, Reason: "Deferred", Message: "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000"}},
		{"the pod itself is not counted twice", podWith("p", rr("1500m", "1500m", "128Mi", "128Mi")), podWith("p", guaranteed), []*v1.Pod{podWith("p", guaranteed)},
			Decision{Resize: true, Allocate: true}},
		{"init container", initPod(rr("1", "1", "128Mi", "128Mi")), initPod(guaranteed), nil,
			Decision{Resize: true, Reason: "Infeasible", Message: msgNonResizable}},
		{"ephemeral storage", podWith("p", func() v1.ResourceRequirements {
			r := guaranteed.DeepCopy()
			r.Limits[v1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
			return *r
		}()), podWith("p", guaranteed), nil, Decision{Resize: true, Reason: "Infeasible", Message: msgNonResizable}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := Decide(tc.desired, tc.allocated, tc.others, alloc, false); got != tc.want {
				t.Errorf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// Under the static CPU manager policy a Guaranteed pod's CPU does not
// change in place (kubelet 1.34's message); its memory does, and other
// pods' CPU does.
func TestDecideStaticCPUs(t *testing.T) {
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi")}
	guaranteed := rr("1", "1", "128Mi", "128Mi")
	for _, tc := range []struct {
		desc               string
		desired, allocated *v1.Pod
		want               Decision
	}{
		{"guaranteed cpu", podWith("p", rr("2", "2", "128Mi", "128Mi")), podWith("p", guaranteed),
			Decision{Resize: true, Reason: "Infeasible", Message: `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"`}},
		{"guaranteed memory", podWith("p", rr("1", "1", "256Mi", "256Mi")), podWith("p", guaranteed), Decision{Resize: true, Allocate: true}},
		{"burstable cpu", podWith("p", rr("500m", "1", "", "")), podWith("p", rr("250m", "1", "", "")), Decision{Resize: true, Allocate: true}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := Decide(tc.desired, tc.allocated, nil, alloc, true); got != tc.want {
				t.Errorf("Decide = %+v, want %+v", got, tc.want)
			}
			if tc.want.Allocate {
				return
			}
			if got := Decide(tc.desired, tc.allocated, nil, alloc, false); !got.Allocate {
				t.Errorf("without the static policy: %+v", got)
			}
		})
	}
}

func TestWithAllocation(t *testing.T) {
	spec := podWith("p", rr("1", "1", "1Gi", "1Gi"), rr("100m", "", "", ""))
	a := Allocation{"a": rr("500m", "500m", "512Mi", "512Mi")}
	got, changed := WithAllocation(spec, a)
	if !changed || got == spec {
		t.Fatalf("changed=%v, same pod=%v", changed, got == spec)
	}
	if q := got.Spec.Containers[0].Resources.Limits.Cpu().MilliValue(); q != 500 {
		t.Errorf("a's cpu limit = %dm, want 500m", q)
	}
	if q := got.Spec.Containers[1].Resources.Requests.Cpu().MilliValue(); q != 100 {
		t.Errorf("b (not in the allocation) cpu request = %dm, want its spec's 100m", q)
	}
	if q := spec.Spec.Containers[0].Resources.Limits.Cpu().MilliValue(); q != 1000 {
		t.Errorf("the spec was modified: %dm", q)
	}
	if p, changed := WithAllocation(spec, AllocationOf(spec)); changed || p != spec {
		t.Errorf("an equal allocation changed the pod")
	}
	// More init containers than containers (a panic once).
	withInits := podWith("q", rr("1", "1", "1Gi", "1Gi"))
	withInits.Spec.InitContainers = []v1.Container{{Name: "i1"}, {Name: "i2", Resources: rr("1", "", "", "")}}
	got, changed = WithAllocation(withInits, Allocation{"i2": rr("2", "", "", "")})
	if !changed || got.Spec.InitContainers[1].Resources.Requests.Cpu().String() != "2" {
		t.Errorf("init container allocation: changed=%v %v", changed, got.Spec.InitContainers[1].Resources)
	}
}

func TestComputeActions(t *testing.T) {
	g := rr("500m", "500m", "128Mi", "128Mi")
	withPolicy := func(p *v1.Pod, name v1.ResourceName, pol v1.ResourceResizeRestartPolicy) *v1.Pod {
		p.Spec.Containers[0].ResizePolicy = append(p.Spec.Containers[0].ResizePolicy, v1.ContainerResizePolicy{ResourceName: name, RestartPolicy: pol})
		return p
	}
	v := func(r v1.ResourceRequirements) Values { return ValuesOf(r) }
	for _, tc := range []struct {
		desc     string
		pod      *v1.Pod
		running  map[string]string
		actuated Allocation
		want     Actions
	}{
		{"nothing changed", podWith("p", g), map[string]string{"a": "id-a"}, Allocation{"a": g}, Actions{}},
		{"not running", podWith("p", rr("1", "1", "128Mi", "128Mi")), nil, Allocation{"a": g}, Actions{}},
		{"cpu up, in place", podWith("p", rr("1", "1", "128Mi", "128Mi")), map[string]string{"a": "id-a"}, Allocation{"a": g},
			Actions{Update: map[v1.ResourceName][]ContainerUpdate{v1.ResourceCPU: {{Name: "a", ID: "id-a", Current: v(g), Desired: v(rr("1", "1", "128Mi", "128Mi"))}}}}},
		{"memory and cpu", podWith("p", rr("1", "1", "256Mi", "256Mi")), map[string]string{"a": "id-a"}, Allocation{"a": g},
			Actions{Update: map[v1.ResourceName][]ContainerUpdate{
				v1.ResourceCPU:    {{Name: "a", ID: "id-a", Current: v(g), Desired: v(rr("1", "1", "256Mi", "256Mi"))}},
				v1.ResourceMemory: {{Name: "a", ID: "id-a", Current: v(g), Desired: v(rr("1", "1", "256Mi", "256Mi"))}},
			}}},
		{"RestartContainer for memory, memory changed", withPolicy(podWith("p", rr("500m", "500m", "256Mi", "256Mi")), v1.ResourceMemory, v1.RestartContainer),
			map[string]string{"a": "id-a"}, Allocation{"a": g},
			Actions{Restart: []Restart{{Name: "a", ID: "id-a", Message: "Container a resize requires restart"}}}},
		{"RestartContainer for memory, cpu changed", withPolicy(podWith("p", rr("1", "1", "128Mi", "128Mi")), v1.ResourceMemory, v1.RestartContainer),
			map[string]string{"a": "id-a"}, Allocation{"a": g},
			Actions{Update: map[v1.ResourceName][]ContainerUpdate{v1.ResourceCPU: {{Name: "a", ID: "id-a", Current: v(g), Desired: v(rr("1", "1", "128Mi", "128Mi"))}}}}},
		{"no actuated record: updated (idempotent)", podWith("p", g), map[string]string{"a": "id-a"}, nil,
			Actions{Update: map[v1.ResourceName][]ContainerUpdate{
				v1.ResourceCPU:    {{Name: "a", ID: "id-a", Desired: v(g)}},
				v1.ResourceMemory: {{Name: "a", ID: "id-a", Desired: v(g)}},
			}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := ComputeActions(tc.pod, tc.running, tc.actuated)
			if !equalActions(got, tc.want) {
				t.Errorf("ComputeActions =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestComputeActionsOrdersDecreasesFirst(t *testing.T) {
	old := rr("500m", "500m", "128Mi", "128Mi")
	p := podWith("p", rr("1", "1", "128Mi", "128Mi"), rr("250m", "250m", "128Mi", "128Mi"), rr("750m", "750m", "128Mi", "128Mi"))
	got := ComputeActions(p, map[string]string{"a": "1", "b": "2", "c": "3"}, Allocation{"a": old, "b": old, "c": old})
	var names []string
	for _, u := range got.Update[v1.ResourceCPU] {
		names = append(names, u.Name)
	}
	if len(names) != 3 || names[0] != "b" {
		t.Errorf("cpu update order %v, want the decrease (b) first", names)
	}
}

func equalActions(a, b Actions) bool {
	if len(a.Update) != len(b.Update) || len(a.Restart) != len(b.Restart) {
		return false
	}
	for k, us := range a.Update {
		if len(us) != len(b.Update[k]) {
			return false
		}
		for i := range us {
			if us[i] != b.Update[k][i] {
				return false
			}
		}
	}
	for i := range a.Restart {
		if a.Restart[i] != b.Restart[i] {
			return false
		}
	}
	return true
}
