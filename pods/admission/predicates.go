package admission

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	corev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// Reasons of kubelet's predicate admission (pkg/kubelet/lifecycle).
const (
	// The scheduler plugins whose filters kubelet runs again on admission
	// (GeneralPredicates); the reason is the plugin's name.
	ReasonNodeAffinity    = "NodeAffinity"
	ReasonNodeName        = "NodeName"
	ReasonNodePorts       = "NodePorts"
	ReasonTaintToleration = "TaintToleration"
)

// AdmitPredicates is the rest of kubelet's GeneralPredicates, checked after
// the resource fit (FitsNode), in kubelet's order, the first failure
// reported: the pod's required node affinity and nodeSelector match node's
// labels; spec.nodeName, if set, is node's name; none of its host ports
// (of app containers and sidecars) is taken by an admitted pod (the same
// protocol and port on the same hostIP, or on 0.0.0.0 on either side); and,
// unless static, it tolerates node's NoExecute taints. The message is
// kubelet's "Predicate <name> failed: <the scheduler plugin's reason>".
func AdmitPredicates(pod *v1.Pod, admitted []*v1.Pod, node *v1.Node, static bool) (ok bool, reason, message string) {
	fail := func(name, why string) (bool, string, string) {
		return false, name, fmt.Sprintf("Predicate %s failed: %s", name, why)
	}
	if match, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !match {
		return fail(ReasonNodeAffinity, "node(s) didn't match Pod's node affinity/selector")
	}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		return fail(ReasonNodeName, "node(s) didn't match the requested node name")
	}
	if hostPortsConflict(pod, admitted) {
		return fail(ReasonNodePorts, "node(s) didn't have free ports for the requested pod ports")
	}
	if !static {
		if _, untolerated := corev1.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, func(t *v1.Taint) bool {
			return t.Effect == v1.TaintEffectNoExecute
		}, false); untolerated {
			return fail(ReasonTaintToleration, "node(s) had taints that the pod didn't tolerate")
		}
	}
	return true, "", ""
}

// hostPort is one (hostIP, protocol, port) a pod binds on the node, with
// kubelet's defaults: no IP is 0.0.0.0, no protocol TCP.
type hostPort struct {
	ip, protocol string
	port         int32
}

// hostPorts lists the host ports of pod's app containers and sidecars (the
// init containers that run for the pod's whole life), as the scheduler
// counts them.
func hostPorts(pod *v1.Pod) []hostPort {
	var out []hostPort
	add := func(cs []v1.ContainerPort) {
		for _, p := range cs {
			if p.HostPort <= 0 {
				continue
			}
			hp := hostPort{ip: p.HostIP, protocol: string(p.Protocol), port: p.HostPort}
			if hp.ip == "" {
				hp.ip = "0.0.0.0"
			}
			if hp.protocol == "" {
				hp.protocol = string(v1.ProtocolTCP)
			}
			out = append(out, hp)
		}
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			add(c.Ports)
		}
	}
	for i := range pod.Spec.Containers {
		add(pod.Spec.Containers[i].Ports)
	}
	return out
}

// hostPortsConflict reports whether one of pod's host ports is taken by an
// admitted pod (an entry with pod's own UID is ignored).
func hostPortsConflict(pod *v1.Pod, admitted []*v1.Pod) bool {
	want := hostPorts(pod)
	if len(want) == 0 {
		return false
	}
	for _, other := range admitted {
		if other == nil || (pod.UID != "" && other.UID == pod.UID) {
			continue
		}
		for _, used := range hostPorts(other) {
			for _, w := range want {
				if w.port == used.port && w.protocol == used.protocol &&
					(w.ip == used.ip || w.ip == "0.0.0.0" || used.ip == "0.0.0.0") {
					return true
				}
			}
		}
	}
	return false
}
