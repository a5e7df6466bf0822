package eviction

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"

	sig "github.com/nodeagent/nodeagent/internal/evictionapi"
	"github.com/nodeagent/nodeagent/kubetypes"
)

// Kubelet's eviction reason, event reasons and annotation keys.
const (
	Reason                      = "Evicted"
	ReasonThresholdMet          = "EvictionThresholdMet"
	AnnotationOffending         = "offending_containers"
	AnnotationOffendingUsage    = "offending_containers_usage"
	AnnotationStarvedResource   = "starved_resource"
	AnnotationOffendingPod      = "offending_pod"
	AnnotationOffendingPodUsage = "offending_pod_usage"
	hardEvictionGracePeriodSecs = 1 // kubelet's immediateEvictionGracePeriodSeconds
)

// availableText prints a signal's available amount as kubelet does:
// bytes in binary units, inodes and PIDs as plain numbers.
func availableText(signal string, v int64) string {
	switch signalResource[signal] {
	case resourceInodes, resourcePIDs:
		return resource.NewQuantity(v, resource.DecimalSI).String()
	}
	return resource.NewQuantity(v, resource.BinarySI).String()
}

// Message is kubelet's eviction message (and event annotations) for a pod
// evicted to reclaim the resource of signal o: "The node was low on
// resource: memory. Threshold quantity: 100Mi, available: 90Mi. Container
// c was using 200Mi, request is 0, has larger consumption of memory. ",
// with "Pod p was using ..., request is ..." before the containers when
// the pod has a pod-level memory request.
func Message(signal string, o sig.Observed, pod *v1.Pod, u PodUsage, measured bool) (string, map[string]string) {
	res := signalResource[signal]
	var b strings.Builder
	fmt.Fprintf(&b, "The node was low on resource: %v. ", res)
	fmt.Fprintf(&b, "Threshold quantity: %v, available: %v. ", o.ThresholdText, availableText(signal, o.Available))
	if !measured {
		return b.String(), map[string]string{}
	}
	annotations := map[string]string{}
	// A pod with a pod-level memory request is named with its usage and
	// that request, whether or not it uses more (kubelet's message with
	// PodLevelResources).
	if res == v1.ResourceMemory && resourcehelper.IsPodLevelResourcesSet(pod) {
		if req, ok := pod.Spec.Resources.Requests[v1.ResourceMemory]; ok {
			used := resource.NewQuantity(u.Memory, resource.BinarySI)
			fmt.Fprintf(&b, "Pod %s was using %s, request is %s, has larger consumption of %v. ", pod.Name, used.String(), req.String(), res)
			annotations[AnnotationOffendingPod] = pod.Name
			annotations[AnnotationOffendingPodUsage] = used.String()
		}
	}
	specs := append(append([]v1.Container{}, pod.Spec.Containers...), pod.Spec.InitContainers...)
	var names, usages []string
	for _, cu := range u.Containers {
		for i := range specs {
			if specs[i].Name != cu.Name {
				continue
			}
			req := specs[i].Resources.Requests[res]
			var used *resource.Quantity
			switch res {
			case v1.ResourceMemory:
				used = resource.NewQuantity(cu.Memory, resource.BinarySI)
			case v1.ResourceEphemeralStorage:
				used = resource.NewQuantity(cu.Disk, resource.BinarySI)
			}
			if used != nil && used.Cmp(req) > 0 {
				fmt.Fprintf(&b, "Container %s was using %s, request is %s, has larger consumption of %v. ", cu.Name, used.String(), req.String(), res)
				names = append(names, cu.Name)
				usages = append(usages, used.String())
			}
			break
		}
	}
	annotations[AnnotationOffending] = strings.Join(names, ",")
	annotations[AnnotationOffendingUsage] = strings.Join(usages, ",")
	annotations[AnnotationStarvedResource] = string(res)
	return b.String(), annotations
}

// IsCritical reports whether kubelet would refuse to evict the pod (and
// admit it under pressure): static and mirror pods, and pods at system
// critical priority or above.
func IsCritical(pod *v1.Pod) bool {
	return kubetypes.IsCriticalPod(pod)
}

// conditionOrder is the order pressure conditions are named in messages.
var conditionOrder = []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure}

// Admit is kubelet's eviction admit handler: under any pressure condition
// only critical pods are admitted, except that under memory pressure alone
// pods that are not BestEffort, and BestEffort pods tolerating the
// memory-pressure taint, are admitted too. reason and message are
// kubelet's ("Evicted", "The node had condition: [DiskPressure]. ").
func Admit(pod *v1.Pod, pressure map[v1.NodeConditionType]bool) (ok bool, reason, message string) {
	var conds []v1.NodeConditionType
	for _, c := range conditionOrder {
		if pressure[c] {
			conds = append(conds, c)
		}
	}
	if len(conds) == 0 || IsCritical(pod) {
		return true, "", ""
	}
	if len(conds) == 1 && conds[0] == v1.NodeMemoryPressure {
		if kubetypes.PodQOSClass(pod) != v1.PodQOSBestEffort {
			return true, "", ""
		}
		taint := &v1.Taint{Key: v1.TaintNodeMemoryPressure, Effect: v1.TaintEffectNoSchedule}
		for i := range pod.Spec.Tolerations {
			if pod.Spec.Tolerations[i].ToleratesTaint(klog.Background(), taint, false) {
				return true, "", ""
			}
		}
	}
	return false, Reason, fmt.Sprintf("The node had condition: %v. ", conds)
}
