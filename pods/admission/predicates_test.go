package admission

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilptr "k8s.io/utils/ptr"
)

func TestAdmitPredicates(t *testing.T) {
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a", "kubernetes.io/hostname": "n1"}},
		Spec:       v1.NodeSpec{Taints: []v1.Taint{{Key: "maint", Value: "yes", Effect: v1.TaintEffectNoExecute}, {Key: "soft", Effect: v1.TaintEffectNoSchedule}}},
	}
	tolerateMaint := []v1.Toleration{{Key: "maint", Operator: v1.TolerationOpExists}}
	pod := func(uid string, ports ...v1.ContainerPort) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid)},
			Spec: v1.PodSpec{Tolerations: tolerateMaint,
				Containers: []v1.Container{{Name: "c", Image: "i", Ports: ports}}},
		}
	}
	tcp := func(ip string, port int32) v1.ContainerPort {
		return v1.ContainerPort{ContainerPort: 80, HostPort: port, HostIP: ip}
	}
	udp := func(port int32) v1.ContainerPort {
		return v1.ContainerPort{ContainerPort: 80, HostPort: port, Protocol: v1.ProtocolUDP}
	}
	withSidecarPort := pod("sidecar")
	withSidecarPort.Spec.InitContainers = []v1.Container{{Name: "s", Image: "i", RestartPolicy: utilptr.To(v1.ContainerRestartPolicyAlways), Ports: []v1.ContainerPort{tcp("", 9000)}}}
	withInitPort := pod("init")
	withInitPort.Spec.InitContainers = []v1.Container{{Name: "s", Image: "i", Ports: []v1.ContainerPort{tcp("", 9001)}}}
	admitted := []*v1.Pod{pod("a", tcp("", 8080)), pod("b", tcp("127.0.0.1", 8081), udp(53)), withSidecarPort, withInitPort}

	cases := []struct {
		name       string
		pod        func() *v1.Pod
		static     bool
		wantReason string
	}{
		{name: "no constraints", pod: func() *v1.Pod { return pod("x") }},
		{name: "nodeSelector matches", pod: func() *v1.Pod { p := pod("x"); p.Spec.NodeSelector = map[string]string{"zone": "a"}; return p }},
		{name: "nodeSelector does not match", pod: func() *v1.Pod { p := pod("x"); p.Spec.NodeSelector = map[string]string{"zone": "b"}; return p }, wantReason: ReasonNodeAffinity},
		{name: "required node affinity does not match", pod: func() *v1.Pod {
			p := pod("x")
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
				NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"c", "d"}}}}}}}}
			return p
		}, wantReason: ReasonNodeAffinity},
		{name: "preferred node affinity is not checked", pod: func() *v1.Pod {
			p := pod("x")
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{Weight: 1,
				Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"c"}}}}}}}}
			return p
		}},
		{name: "another node's name", pod: func() *v1.Pod { p := pod("x"); p.Spec.NodeName = "n2"; return p }, wantReason: ReasonNodeName},
		{name: "this node's name", pod: func() *v1.Pod { p := pod("x"); p.Spec.NodeName = "n1"; return p }},
		{name: "host port taken on all addresses", pod: func() *v1.Pod { return pod("x", tcp("10.0.0.1", 8080)) }, wantReason: ReasonNodePorts},
		{name: "all addresses vs a taken specific one", pod: func() *v1.Pod { return pod("x", tcp("", 8081)) }, wantReason: ReasonNodePorts},
		{name: "same port another address", pod: func() *v1.Pod { return pod("x", tcp("127.0.0.2", 8081)) }},
		{name: "same port other protocol", pod: func() *v1.Pod { return pod("x", udp(8080)) }},
		{name: "udp port taken", pod: func() *v1.Pod { return pod("x", udp(53)) }, wantReason: ReasonNodePorts},
		{name: "a sidecar's host port counts", pod: func() *v1.Pod { return pod("x", tcp("", 9000)) }, wantReason: ReasonNodePorts},
		{name: "a regular init container's host port does not", pod: func() *v1.Pod { return pod("x", tcp("", 9001)) }},
		{name: "its own entry is ignored", pod: func() *v1.Pod { return pod("a", tcp("", 8080)) }},
		{name: "container port without host port", pod: func() *v1.Pod { return pod("x", v1.ContainerPort{ContainerPort: 8080}) }},
		{name: "untolerated NoExecute taint", pod: func() *v1.Pod { p := pod("x"); p.Spec.Tolerations = nil; return p }, wantReason: ReasonTaintToleration},
		{name: "static pods ignore taints", pod: func() *v1.Pod { p := pod("x"); p.Spec.Tolerations = nil; return p }, static: true},
		{name: "NoSchedule taints are the scheduler's", pod: func() *v1.Pod { return pod("x") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason, msg := AdmitPredicates(tc.pod(), admitted, node, tc.static)
			if ok != (tc.wantReason == "") || reason != tc.wantReason {
				t.Fatalf("AdmitPredicates = %v, %q, %q; want reason %q", ok, reason, msg, tc.wantReason)
			}
			if !ok && msg != "Predicate "+reason+" failed: "+predicateWhy[reason] {
				t.Errorf("message %q", msg)
			}
		})
	}
}

// predicateWhy are the scheduler plugins' reasons kubelet quotes.
var predicateWhy = map[string]string{
	ReasonNodeAffinity:    "node(s) didn't match Pod's node affinity/selector",
	ReasonNodeName:        "node(s) didn't match the requested node name",
	ReasonNodePorts:       "node(s) didn't have free ports for the requested pod ports",
	ReasonTaintToleration: "node(s) had taints that the pod didn't tolerate",
}
