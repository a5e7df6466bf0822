// Package admission decides whether the node runs a pod, once, when it
// first sees it: Unsupported lists the fields of the pod spec outside what
// nodeagent implements (refused as UnsupportedPodSpec, every field named),
// and FitsNode is kubelet's resource fit (OutOfcpu, OutOfmemory, OutOfpods
// and the other "OutOf" + resource reasons) against the node's
// allocatable. Both are pure functions of their arguments.
package admission
