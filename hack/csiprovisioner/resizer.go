package main

// The -resizer part: a stand-in for kubernetes-csi's external-resizer
// (its Go module is not served here either), with the semantics it has
// against a 1.34 control plane (RecoverVolumeExpansionFailure GA): for a
// bound claim whose PV is a volume of the driver, whose StorageClass
// allows expansion, and whose request exceeds its status.capacity, it
//
//  1. marks the claim ControllerResizeInProgress
//     (status.allocatedResourceStatuses.storage), with the new size as
//     status.allocatedResources.storage and a Resizing condition (the
//     "Resizing" Event);
//  2. calls the driver's ControllerExpandVolume (a driver without the
//     EXPAND_VOLUME controller capability is resized trivially, as
//     external-resizer's trivial resizer: no call, node expansion
//     required);
//  3. sets the PV's capacity to the size the driver returns;
//  4. when the driver wants node expansion, marks the claim
//     NodeResizePending with a FileSystemResizePending condition (the
//     node agent finishes: NodeExpandVolume, status.capacity, the status
//     and conditions cleared; "FileSystemResizeRequired"); when not, sets
//     status.capacity to the new size and clears the storage status and
//     the resize conditions itself ("VolumeResizeSuccessful").
//
// A failed ControllerExpandVolume adds a ControllerResizeError condition
// ("VolumeResizeFailed"); InvalidArgument, OutOfRange and NotFound (final
// for the volume at that size) mark the claim ControllerResizeInfeasible,
// others leave it ControllerResizeInProgress, and the claim is retried.
// The claim updates are the status-patch helpers of
// k8s.io/kubernetes/pkg/volume/util/resize_util.go that external-resizer
// uses (MarkControllerReisizeInProgress, MarkForFSResize,
// MarkFSResizeFinished), written again here.

import (
	"context"
	"fmt"
	"log"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
)

// resizeConditions are the claim conditions of the resize flow
// (resize_util.go's knownResizeConditions).
var resizeConditions = map[v1.PersistentVolumeClaimConditionType]bool{
	v1.PersistentVolumeClaimFileSystemResizePending: true,
	v1.PersistentVolumeClaimResizing:                true,
	v1.PersistentVolumeClaimControllerResizeError:   true,
	v1.PersistentVolumeClaimNodeResizeError:         true,
}

// Resizer expands the volumes of one driver.
type Resizer struct {
	Driver     string
	Client     kubernetes.Interface
	Controller csipb.ControllerClient
	Recorder   record.EventRecorder
	// controllerExpand: the driver has the EXPAND_VOLUME controller
	// capability (asked once, at the first claim to expand).
	controllerExpand *bool
}

// RunResizer expands claims of driver until ctx is done: a claim informer
// (resynced every 15 s) feeding a rate-limited queue, one worker.
func RunResizer(ctx context.Context, client kubernetes.Interface, driver string, ctrl csipb.ControllerClient) {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer b.Shutdown()
	r := &Resizer{Driver: driver, Client: client, Controller: ctrl,
		Recorder: b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "external-resizer " + driver})}
	f := informers.NewSharedInformerFactory(client, 15*time.Second)
	inf := f.Core().V1().PersistentVolumeClaims().Informer()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 30*time.Second))
	defer q.ShutDown()
	add := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			q.Add(key)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) },
	}); err != nil {
		log.Printf("resizer: %v", err)
		return
	}
	f.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	go func() { <-ctx.Done(); q.ShutDown() }()
	for {
		key, quit := q.Get()
		if quit {
			return
		}
		obj, ok, err := inf.GetStore().GetByKey(key)
		if err == nil && ok {
			err = r.sync(ctx, obj.(*v1.PersistentVolumeClaim))
		}
		if err != nil {
			utilruntime.HandleError(fmt.Errorf("resizer: claim %s: %w", key, err))
			q.AddRateLimited(key)
		} else {
			q.Forget(key)
		}
		q.Done(key)
	}
}

// sync expands pvc when it is the resizer's to expand.
func (r *Resizer) sync(ctx context.Context, pvc *v1.PersistentVolumeClaim) error {
	if pvc.Status.Phase != v1.ClaimBound || pvc.Spec.VolumeName == "" {
		return nil
	}
	want := pvc.Spec.Resources.Requests[v1.ResourceStorage]
	have := pvc.Status.Capacity[v1.ResourceStorage]
	if want.Cmp(have) <= 0 {
		return nil
	}
	switch pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage] {
	case v1.PersistentVolumeClaimNodeResizePending, v1.PersistentVolumeClaimNodeResizeInProgress, v1.PersistentVolumeClaimNodeResizeInfeasible:
		// The node's turn, unless the request grew past what the
		// controller expanded to.
		if alloc := pvc.Status.AllocatedResources[v1.ResourceStorage]; want.Cmp(alloc) <= 0 {
			return nil
		}
	}
	pv, err := r.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != r.Driver {
		return nil
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != pvc.UID {
		return nil // not bound to this claim (external-resizer checks the claimRef too)
	}
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return nil
	}
	sc, err := r.Client.StorageV1().StorageClasses().Get(ctx, *pvc.Spec.StorageClassName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion {
		return nil
	}

	// 1. In progress.
	pvc, err = r.updateClaim(ctx, pvc, func(c *v1.PersistentVolumeClaim) {
		mergeConditions(c, false, v1.PersistentVolumeClaimCondition{Type: v1.PersistentVolumeClaimResizing, Status: v1.ConditionTrue, LastTransitionTime: metav1.Now()})
		setStorageStatus(c, v1.PersistentVolumeClaimControllerResizeInProgress)
		if c.Status.AllocatedResources == nil {
			c.Status.AllocatedResources = v1.ResourceList{}
		}
		c.Status.AllocatedResources[v1.ResourceStorage] = want
	})
	if err != nil {
		return fmt.Errorf("marking the controller resize in progress: %w", err)
	}
	r.Recorder.Event(pvc, v1.EventTypeNormal, "Resizing", fmt.Sprintf("External resizer is resizing volume %s", pv.Name))

	// 2. The driver.
	size, nodeExpand, err := r.expand(ctx, pv, want)
	if err != nil {
		msg := fmt.Sprintf("resize volume %q by resizer %q failed: %v", pv.Name, r.Driver, err)
		r.Recorder.Event(pvc, v1.EventTypeWarning, "VolumeResizeFailed", msg)
		if _, uerr := r.updateClaim(ctx, pvc, func(c *v1.PersistentVolumeClaim) {
			mergeConditions(c, false, v1.PersistentVolumeClaimCondition{Type: v1.PersistentVolumeClaimControllerResizeError, Status: v1.ConditionTrue, LastTransitionTime: metav1.Now(), Message: msg})
			switch status.Code(err) {
			case codes.InvalidArgument, codes.OutOfRange, codes.NotFound:
				setStorageStatus(c, v1.PersistentVolumeClaimControllerResizeInfeasible)
			}
		}); uerr != nil {
			log.Printf("resizer: claim %s/%s: %v", pvc.Namespace, pvc.Name, uerr)
		}
		return fmt.Errorf("%s", msg)
	}

	// 3. The PV.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := r.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := cur.Spec.Capacity[v1.ResourceStorage]; c.Cmp(size) >= 0 {
			return nil
		}
		cur.Spec.Capacity[v1.ResourceStorage] = size
		_, err = r.Client.CoreV1().PersistentVolumes().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("updating PV %s's capacity: %w", pv.Name, err)
	}
	log.Printf("resizer: expanded volume %s (claim %s/%s) to %s, node expansion required: %v", pv.Spec.CSI.VolumeHandle, pvc.Namespace, pvc.Name, size.String(), nodeExpand)

	// 4. The claim: the node's turn, or done.
	if nodeExpand {
		_, err = r.updateClaim(ctx, pvc, func(c *v1.PersistentVolumeClaim) {
			setStorageStatus(c, v1.PersistentVolumeClaimNodeResizePending)
			mergeConditions(c, true, v1.PersistentVolumeClaimCondition{Type: v1.PersistentVolumeClaimFileSystemResizePending, Status: v1.ConditionTrue, LastTransitionTime: metav1.Now(),
				Message: "Waiting for user to (re-)start a pod to finish file system resize of volume on node."})
		})
		if err == nil {
			r.Recorder.Event(pvc, v1.EventTypeNormal, "FileSystemResizeRequired", "Require file system resize of volume on node")
		}
		return err
	}
	_, err = r.updateClaim(ctx, pvc, func(c *v1.PersistentVolumeClaim) {
		if c.Status.Capacity == nil {
			c.Status.Capacity = v1.ResourceList{}
		}
		c.Status.Capacity[v1.ResourceStorage] = size
		delete(c.Status.AllocatedResourceStatuses, v1.ResourceStorage)
		if len(c.Status.AllocatedResourceStatuses) == 0 {
			c.Status.AllocatedResourceStatuses = nil
		}
		mergeConditions(c, false)
	})
	if err == nil {
		r.Recorder.Event(pvc, v1.EventTypeNormal, "VolumeResizeSuccessful", "Resize volume succeeded")
	}
	return err
}

// expand calls ControllerExpandVolume for pv at want and returns the size
// the volume has and whether the node must expand it too.
func (r *Resizer) expand(ctx context.Context, pv *v1.PersistentVolume, want resource.Quantity) (resource.Quantity, bool, error) {
	if r.controllerExpand == nil {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		resp, err := r.Controller.ControllerGetCapabilities(cctx, &csipb.ControllerGetCapabilitiesRequest{})
		cancel()
		if err != nil {
			return want, false, err
		}
		yes := false
		for _, c := range resp.Capabilities {
			yes = yes || c.GetRpc().GetType() == csipb.ControllerServiceCapability_RPC_EXPAND_VOLUME
		}
		r.controllerExpand = &yes
	}
	if !*r.controllerExpand {
		return want, true, nil // the trivial resizer: the node does it all
	}
	capability := &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: pv.Spec.CSI.FSType, MountFlags: pv.Spec.MountOptions}},
	}
	if pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == v1.PersistentVolumeBlock {
		capability.AccessType = &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}}
	}
	if len(pv.Spec.AccessModes) > 0 {
		capability.AccessMode = &csipb.VolumeCapability_AccessMode{Mode: accessMode(pv.Spec.AccessModes[0])}
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := r.Controller.ControllerExpandVolume(cctx, &csipb.ControllerExpandVolumeRequest{
		VolumeId: pv.Spec.CSI.VolumeHandle, CapacityRange: &csipb.CapacityRange{RequiredBytes: want.Value()},
		VolumeCapability: capability,
	})
	if err != nil {
		return want, false, err
	}
	size := want
	if resp.CapacityBytes > want.Value() {
		size = *resource.NewQuantity(resp.CapacityBytes, resource.BinarySI)
	}
	return size, resp.NodeExpansionRequired, nil
}

// updateClaim applies change to the latest pvc and writes its status,
// again on a conflict (the node agent writes the status too).
func (r *Resizer) updateClaim(ctx context.Context, pvc *v1.PersistentVolumeClaim, change func(*v1.PersistentVolumeClaim)) (*v1.PersistentVolumeClaim, error) {
	var out *v1.PersistentVolumeClaim
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := r.Client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Get(ctx, pvc.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(cur)
		out, err = r.Client.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	return out, err
}

// setStorageStatus sets status.allocatedResourceStatuses.storage.
func setStorageStatus(c *v1.PersistentVolumeClaim, s v1.ClaimResourceStatus) {
	if c.Status.AllocatedResourceStatuses == nil {
		c.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{}
	}
	c.Status.AllocatedResourceStatuses[v1.ResourceStorage] = s
}

// mergeConditions is resize_util.go's MergeResizeConditionOnPVC: the
// claim's other conditions stay; a resize condition of a type in conds is
// replaced by it when its status changes; the other resize conditions
// stay when keepOld; the conditions of conds not there yet are added.
func mergeConditions(c *v1.PersistentVolumeClaim, keepOld bool, conds ...v1.PersistentVolumeClaimCondition) {
	byType := map[v1.PersistentVolumeClaimConditionType]int{}
	for i, n := range conds {
		byType[n.Type] = i
	}
	done := make([]bool, len(conds))
	out := []v1.PersistentVolumeClaimCondition{}
	for _, old := range c.Status.Conditions {
		if !resizeConditions[old.Type] {
			out = append(out, old)
			continue
		}
		if i, ok := byType[old.Type]; ok {
			if conds[i].Status != old.Status {
				out = append(out, conds[i])
			} else {
				out = append(out, old)
			}
			done[i] = true
		} else if keepOld {
			out = append(out, old)
		}
	}
	for i, n := range conds {
		if !done[i] {
			out = append(out, n)
		}
	}
	c.Status.Conditions = out
}
