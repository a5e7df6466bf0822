package nodestatus

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

// Setter modifies the node's status in place. It may set part of the status
// before returning an error; the other setters still run.
type Setter func(ctx context.Context, node *v1.Node) error

// NodeAddress sets the InternalIP and Hostname addresses.
func NodeAddress(
	internalIP func() (string, error), // configured nodeIP, else Host.InternalIP
	hostname string, // Options.Hostname
) Setter {
	return func(ctx context.Context, node *v1.Node) error {
		ip, err := internalIP()
		if err != nil {
			// Keep what was reported: a transient lookup failure must not
			// drop the node's address.
			if len(node.Status.Addresses) > 0 {
				return fmt.Errorf("node address: %w", err)
			}
			node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeHostName, Address: hostname}}
			return fmt.Errorf("node address: %w", err)
		}
		node.Status.Addresses = []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: ip},
			{Type: v1.NodeHostName, Address: hostname},
		}
		return nil
	}
}

// DaemonEndpoints sets status.daemonEndpoints.kubeletEndpoint.Port, where
// the API server reaches the node API.
func DaemonEndpoints(port int32) Setter { // Options.KubeletPort
	return func(_ context.Context, node *v1.Node) error {
		node.Status.DaemonEndpoints.KubeletEndpoint.Port = port
		return nil
	}
}

// VolumesInUse sets status.volumesInUse, as kubelet's setter of that name:
// the attach/detach controller does not detach a volume listed there, so
// a volume stays listed until it is unmounted and unstaged. The
// controller's own status.volumesAttached is left alone. Until synced
// (nil: always) says the list is complete — the agent's volume
// reconstruction has run — the field keeps its value, as kubelet's setter
// waits for its volume reconciler.
func VolumesInUse(synced func() bool, // Options.VolumesInUseSynced
	inUse func() []v1.UniqueVolumeName, // Options.VolumesInUse
) Setter {
	return func(_ context.Context, node *v1.Node) error {
		if synced == nil || synced() {
			node.Status.VolumesInUse = inUse()
		}
		return nil
	}
}

// Capacity sets capacity and allocatable. capacity returns the resources it
// could measure and an error for those it could not; resources it could not
// measure keep their previous value (and are "missing" for Ready if they never
// had one). Hugepage sizes no longer reported are removed. Allocatable follows
// kubelet's formula (see Allocatable).
func Capacity(
	capacity func() (v1.ResourceList, error), // Manager: cpu, memory, pods, ephemeral-storage, hugepages-*
	reserved v1.ResourceList, // systemReserved + kubeReserved
	evictionReservation func(capacity v1.ResourceList) v1.ResourceList, // hard eviction thresholds
) Setter {
	return func(ctx context.Context, node *v1.Node) error {
		measured, err := capacity()
		if node.Status.Capacity == nil {
			node.Status.Capacity = v1.ResourceList{}
		}
		if err == nil {
			for k := range node.Status.Capacity {
				if _, ok := measured[k]; !ok && strings.HasPrefix(string(k), v1.ResourceHugePagesPrefix) {
					delete(node.Status.Capacity, k)
				}
			}
		}
		for k, v := range measured {
			node.Status.Capacity[k] = v
		}
		alloc := Allocatable(node.Status.Capacity, reserved, evictionReservation(node.Status.Capacity))
		if node.Status.Allocatable == nil {
			node.Status.Allocatable = v1.ResourceList{}
		}
		for k := range node.Status.Allocatable {
			if _, ok := alloc[k]; !ok {
				delete(node.Status.Allocatable, k)
			}
		}
		for k, v := range alloc {
			node.Status.Allocatable[k] = v
		}
		if err != nil {
			return fmt.Errorf("capacity: %w", err)
		}
		return nil
	}
}

// DevicePlugins sets the device plugins' resources in capacity and
// allocatable after Capacity, as kubelet's MachineInfo and allocatable
// setters: a resource's capacity counts all its devices, its allocatable
// the healthy ones; a removed resource keeps capacity (and allocatable) 0
// instead of disappearing, which says it is managed by a device plugin.
func DevicePlugins(
	resources func() (capacity, allocatable v1.ResourceList, removed []string), // devicemanager.Manager.Capacity
) Setter {
	return func(_ context.Context, node *v1.Node) error {
		c, a, removed := resources()
		if node.Status.Capacity == nil {
			node.Status.Capacity = v1.ResourceList{}
		}
		if node.Status.Allocatable == nil {
			node.Status.Allocatable = v1.ResourceList{}
		}
		for k, v := range c {
			node.Status.Capacity[k] = v
		}
		for k, v := range a {
			node.Status.Allocatable[k] = v
		}
		for _, r := range removed {
			node.Status.Capacity[v1.ResourceName(r)] = *resource.NewQuantity(0, resource.DecimalSI)
			node.Status.Allocatable[v1.ResourceName(r)] = *resource.NewQuantity(0, resource.DecimalSI)
		}
		return nil
	}
}

// NodeInfo sets status.nodeInfo. Fields info could not read keep their
// previous value. containerRuntimeVersion is "name://version".
func NodeInfo(
	info func(ctx context.Context) (v1.NodeSystemInfo, error), // Manager: Host files, uname, the runtime
) Setter {
	return func(ctx context.Context, node *v1.Node) error {
		ni, err := info(ctx)
		cur := &node.Status.NodeInfo
		set := func(dst *string, v string) {
			if v != "" {
				*dst = v
			}
		}
		set(&cur.MachineID, ni.MachineID)
		set(&cur.SystemUUID, ni.SystemUUID)
		set(&cur.BootID, ni.BootID)
		set(&cur.KernelVersion, ni.KernelVersion)
		set(&cur.OSImage, ni.OSImage)
		set(&cur.ContainerRuntimeVersion, ni.ContainerRuntimeVersion)
		set(&cur.KubeletVersion, ni.KubeletVersion)
		if ni.Swap != nil { // kubelet sets it when the host has swap, and never clears it
			cur.Swap = ni.Swap
		}
		cur.KubeProxyVersion = "" // deprecated; kubelet clears it too
		cur.OperatingSystem = goruntime.GOOS
		cur.Architecture = goruntime.GOARCH
		if err != nil {
			return fmt.Errorf("node info: %w", err)
		}
		return nil
	}
}

// Images sets status.images: the largest maxImages images (-1 = all), each
// with at most MaxNamesPerImage names, as kubelet reports them. When list
// fails the previous list is kept.
func Images(maxImages int32,
	list func(ctx context.Context) ([]Image, bool, error), // the runtime's images; ok=false: never listed
) Setter {
	return func(ctx context.Context, node *v1.Node) error {
		images, ok, err := list(ctx)
		if !ok {
			if err != nil {
				return fmt.Errorf("images: %w", err)
			}
			return nil
		}
		node.Status.Images = ImageList(images, maxImages)
		if err != nil {
			return fmt.Errorf("images (reporting the last good list): %w", err)
		}
		return nil
	}
}

// ImageList converts runtime images to the status form: images without names
// are skipped (kubelet cannot refer to them), largest first (ties by ID), at
// most maxImages (-1 = all), at most MaxNamesPerImage names each.
func ImageList(images []Image, maxImages int32) []v1.ContainerImage {
	sorted := make([]Image, 0, len(images))
	for _, im := range images {
		if len(im.Names) > 0 {
			sorted = append(sorted, im)
		}
	}
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].SizeBytes != sorted[j].SizeBytes {
			return sorted[i].SizeBytes > sorted[j].SizeBytes
		}
		return sorted[i].ID < sorted[j].ID
	})
	if maxImages >= 0 && int(maxImages) < len(sorted) {
		sorted = sorted[:maxImages]
	}
	if len(sorted) == 0 {
		return nil
	}
	out := make([]v1.ContainerImage, 0, len(sorted))
	for _, im := range sorted {
		names := im.Names
		if len(names) > MaxNamesPerImage {
			names = names[:MaxNamesPerImage]
		}
		out = append(out, v1.ContainerImage{Names: append([]string(nil), names...), SizeBytes: im.SizeBytes})
	}
	return out
}

// pressureText holds kubelet's reasons and messages for a pressure condition.
type pressureText struct{ trueReason, trueMessage, falseReason, falseMessage string }

var pressureTexts = map[v1.NodeConditionType]pressureText{
	v1.NodeMemoryPressure: {"KubeletHasInsufficientMemory", "kubelet has insufficient memory available",
		"KubeletHasSufficientMemory", "kubelet has sufficient memory available"},
	v1.NodeDiskPressure: {"KubeletHasDiskPressure", "kubelet has disk pressure",
		"KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
	v1.NodePIDPressure: {"KubeletHasInsufficientPID", "kubelet has insufficient PID available",
		"KubeletHasSufficientPID", "kubelet has sufficient PID available"},
}

// PressureCondition sets one of MemoryPressure, DiskPressure or PIDPressure
// with kubelet's reasons and messages. lastTransitionTime changes only when
// the status flips.
func PressureCondition(cond v1.NodeConditionType,
	now func() time.Time, // the Manager's clock
	pressure func() bool, // the threshold verdict after the transition period (PressureActive)
) Setter {
	text, ok := pressureTexts[cond]
	if !ok {
		panic(fmt.Sprintf("nodestatus: %s is not a pressure condition", cond))
	}
	return func(ctx context.Context, node *v1.Node) error {
		c := v1.NodeCondition{Type: cond, Status: v1.ConditionFalse, Reason: text.falseReason, Message: text.falseMessage}
		if pressure() {
			c = v1.NodeCondition{Type: cond, Status: v1.ConditionTrue, Reason: text.trueReason, Message: text.trueMessage}
		}
		setCondition(node, c, metav1.NewTime(now()))
		return nil
	}
}

// RequiredCapacity are the resources without which the node is not Ready.
var RequiredCapacity = []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourcePods, v1.ResourceEphemeralStorage}

// ReadyCondition sets Ready: True ("KubeletReady") unless errs reports a cause
// or a required capacity is missing, then False ("KubeletNotReady") with the
// causes as message. It must run after Capacity.
func ReadyCondition(
	now func() time.Time, // the Manager's clock
	errs func() []error, // runtime, PLEG (already debounced by the Manager), network
) Setter {
	return func(ctx context.Context, node *v1.Node) error {
		all := errs()
		var missing []string
		for _, r := range RequiredCapacity {
			if _, ok := node.Status.Capacity[r]; !ok {
				missing = append(missing, string(r))
			}
		}
		if len(missing) > 0 {
			all = append(all, fmt.Errorf("missing node capacity for resources: %s", strings.Join(missing, ", ")))
		}
		c := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"}
		if agg := utilerrors.NewAggregate(all); agg != nil {
			c = v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: "KubeletNotReady", Message: agg.Error()}
		}
		setCondition(node, c, metav1.NewTime(now()))
		return nil
	}
}

// setCondition replaces or appends c, keeping lastTransitionTime unless the
// status flips, and stamping lastHeartbeatTime.
func setCondition(node *v1.Node, c v1.NodeCondition, now metav1.Time) {
	c.LastHeartbeatTime = now
	for i := range node.Status.Conditions {
		old := &node.Status.Conditions[i]
		if old.Type != c.Type {
			continue
		}
		c.LastTransitionTime = old.LastTransitionTime
		if old.Status != c.Status || c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = now
		}
		*old = c
		return
	}
	c.LastTransitionTime = now
	node.Status.Conditions = append(node.Status.Conditions, c)
}

// quantity helpers
func bytesQ(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.BinarySI) }
func countQ(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }
