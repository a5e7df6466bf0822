// Package kubetypes is the pod vocabulary nodeagent shares with kubelet
// (its pkg/kubelet/types, imported there as kubetypes, and the QoS helper
// of pkg/apis/core/v1/helper/qos): the annotations kubelet puts on the pods
// it takes from sources, the source names, the pod's full name (the key
// that ties a static pod to its mirror pod), priorities and critical pods,
// the QoS class and sidecar helpers. pods, cm, eviction and shutdown all
// use it, so it sits at the top level rather than under pods/. It makes no
// decisions of its own and imports nothing of ours.
package kubetypes

import (
	v1 "k8s.io/api/core/v1"
)

// Annotations kubelet puts on pods it takes from sources; nodeagent uses the
// same keys so that tools that know kubelet's conventions read them.
const (
	// AnnotationConfigSource is the source a pod came from: SourceFile or
	// SourceAPI.
	AnnotationConfigSource = "kubernetes.io/config.source"
	// AnnotationConfigHash is a hash of a static pod's manifest (its UID).
	AnnotationConfigHash = "kubernetes.io/config.hash"
	// AnnotationConfigMirror marks a mirror pod; its value is the static
	// pod's config hash.
	AnnotationConfigMirror = "kubernetes.io/config.mirror"
)

// Pod sources.
const (
	SourceFile = "file"
	SourceAPI  = "api"
)

// FullName is namespace/name, the key kubelet uses for a pod across its
// sources (a static pod and its mirror pod share it).
func FullName(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

// IsMirrorPod reports whether p is a mirror pod (the API's reflection of a
// static pod).
func IsMirrorPod(p *v1.Pod) bool {
	_, ok := p.Annotations[AnnotationConfigMirror]
	return ok
}

// IsStaticPod reports whether p came from the static pod directory.
func IsStaticPod(p *v1.Pod) bool {
	return p.Annotations[AnnotationConfigSource] == SourceFile
}

// SystemCriticalPriority is the lowest priority of a critical pod
// (scheduling.SystemCriticalPriority: the system-cluster-critical and
// system-node-critical classes are at or above it).
const SystemCriticalPriority int32 = 2000000000

// Priority is the pod's priority, 0 when it has none (as kubelet counts it).
func Priority(p *v1.Pod) int32 {
	if p.Spec.Priority == nil {
		return 0
	}
	return *p.Spec.Priority
}

// IsCriticalPod is kubelet's critical pod: static, mirror, or at
// SystemCriticalPriority or above. Critical pods are not evicted, are
// admitted under node pressure, and (if node-critical) score as Guaranteed
// for the OOM killer.
func IsCriticalPod(p *v1.Pod) bool {
	return IsStaticPod(p) || IsMirrorPod(p) || Priority(p) >= SystemCriticalPriority
}

// MetadataField is the value of a fieldRef to the pod's identity
// (metadata.name, metadata.namespace, metadata.uid); false for other paths.
func MetadataField(pod *v1.Pod, path string) (string, bool) {
	switch path {
	case "metadata.name":
		return pod.Name, true
	case "metadata.namespace":
		return pod.Namespace, true
	case "metadata.uid":
		return string(pod.UID), true
	}
	return "", false
}

// EventComponent is the source component of the events the agent records,
// kubelet's: tools, dashboards and upstream tests select a node's events
// with source=kubelet (and the node's name as the source host).
const EventComponent = "kubelet"
