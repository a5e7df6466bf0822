package csi

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// annotationNodeID is kubelet's Node annotation: a JSON map of driver
// names to their node IDs.
const annotationNodeID = "csi.volume.kubernetes.io/nodeid"

// NodeGetter reads and updates the Node (client-go's typed client and
// internal/kubeclient's satisfy it).
type NodeGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Node, error)
	Update(ctx context.Context, node *v1.Node, opts metav1.UpdateOptions) (*v1.Node, error)
}

// CSINodeClient reads and writes CSINode objects.
type CSINodeClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*storagev1.CSINode, error)
	Create(ctx context.Context, n *storagev1.CSINode, opts metav1.CreateOptions) (*storagev1.CSINode, error)
	Update(ctx context.Context, n *storagev1.CSINode, opts metav1.UpdateOptions) (*storagev1.CSINode, error)
}

// NodeInfo keeps the node's CSINode object and the CSI parts of its Node
// object (topology labels, node ID annotation), as kubelet's
// nodeinfomanager.
type NodeInfo struct {
	NodeName string
	Nodes    NodeGetter
	CSINodes CSINodeClient
}

var _ NodeInfoHandler = (*NodeInfo)(nil)

// updateBackoff is kubelet's nodeinfomanager's: 4 tries from 10 ms, ×5.
var updateBackoff = wait.Backoff{Steps: 4, Duration: 10 * time.Millisecond, Factor: 5.0, Jitter: 0.1}

// InstallDriver is kubelet's InstallCSIDriver: the driver's node ID in the
// Node's annotation and its topology as Node labels (a label with another
// value already is an error, "topology value collision"), then the driver
// entry of the CSINode (created, owned by the Node, when missing).
func (n *NodeInfo) InstallDriver(ctx context.Context, name string, info *csipb.NodeGetInfoResponse) error {
	if info.GetNodeId() == "" {
		return fmt.Errorf("error adding CSI driver node info: driverNodeID must not be empty")
	}
	topology := info.GetAccessibleTopology().GetSegments()
	if err := n.updateNode(ctx, func(node *v1.Node) (bool, error) {
		return installInNode(node, name, info.GetNodeId(), topology)
	}); err != nil {
		return fmt.Errorf("error updating Node object with CSI driver node info: %v", err)
	}
	if err := n.updateCSINode(ctx, func(c *storagev1.CSINode) bool {
		// kubelet's installDriverToCSINode sets the migration annotation
		// too (both evaluated: either change is written).
		annotated := setMigrationAnnotation(c)
		return installInCSINode(c, name, info.GetNodeId(), info.GetMaxVolumesPerNode(), topology) || annotated
	}); err != nil {
		return fmt.Errorf("error updating CSINode object with CSI driver node info: %v", err)
	}
	return nil
}

// UninstallDriver is kubelet's UninstallCSIDriver: the driver's entry out
// of the CSINode and its node ID out of the Node's annotation (its topology
// labels stay, as under kubelet).
func (n *NodeInfo) UninstallDriver(ctx context.Context, name string) error {
	if err := n.updateCSINode(ctx, func(c *storagev1.CSINode) bool {
		i := slices.IndexFunc(c.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == name })
		if i < 0 {
			return false
		}
		c.Spec.Drivers = slices.Delete(c.Spec.Drivers, i, i+1)
		return true
	}); err != nil {
		return fmt.Errorf("error uninstalling CSI driver from CSINode object %v", err)
	}
	if err := n.updateNode(ctx, func(node *v1.Node) (bool, error) { return removeNodeID(node, name) }); err != nil {
		return fmt.Errorf("error removing CSI driver node info from Node object %v", err)
	}
	return nil
}

func installInNode(node *v1.Node, driver, nodeID string, topology map[string]string) (bool, error) {
	ids := map[string]string{}
	if a := node.Annotations[annotationNodeID]; a != "" {
		if err := json.Unmarshal([]byte(a), &ids); err != nil {
			return false, fmt.Errorf("failed to parse node annotation %q=%q: %v", annotationNodeID, a, err)
		}
	}
	changed := false
	if ids[driver] != nodeID {
		ids[driver] = nodeID
		b, err := json.Marshal(ids)
		if err != nil {
			return false, err
		}
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Annotations[annotationNodeID] = string(b)
		changed = true
	}
	for k, v := range topology {
		cur, ok := node.Labels[k]
		if ok && cur != v {
			return false, fmt.Errorf("detected topology value collision: driver reported %q:%q but existing label is %q:%q", k, v, k, cur)
		}
		if !ok {
			if node.Labels == nil {
				node.Labels = map[string]string{}
			}
			node.Labels[k] = v
			changed = true
		}
	}
	return changed, nil
}

func removeNodeID(node *v1.Node, driver string) (bool, error) {
	a := node.Annotations[annotationNodeID]
	if a == "" {
		return false, nil
	}
	ids := map[string]string{}
	if err := json.Unmarshal([]byte(a), &ids); err != nil {
		return false, fmt.Errorf("failed to parse node annotation %q=%q: %v", annotationNodeID, a, err)
	}
	if _, ok := ids[driver]; !ok {
		return false, nil
	}
	delete(ids, driver)
	if len(ids) == 0 {
		delete(node.Annotations, annotationNodeID)
		return true, nil
	}
	b, err := json.Marshal(ids)
	if err != nil {
		return false, err
	}
	node.Annotations[annotationNodeID] = string(b)
	return true, nil
}

// installInCSINode puts the driver's entry in c (replacing one of the same
// name) and reports whether c changed: the topology keys sorted, the
// allocatable count when the driver reports a positive maximum (capped to
// int32, as kubelet).
func installInCSINode(c *storagev1.CSINode, driver, nodeID string, maxVolumes int64, topology map[string]string) bool {
	keys := make([]string, 0, len(topology))
	for k := range topology {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := storagev1.CSINodeDriver{Name: driver, NodeID: nodeID, TopologyKeys: keys}
	if maxVolumes > 0 {
		m := int32(min(maxVolumes, math.MaxInt32))
		want.Allocatable = &storagev1.VolumeNodeResources{Count: &m}
	}
	i := slices.IndexFunc(c.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver })
	if i >= 0 && sameDriver(c.Spec.Drivers[i], want) {
		return false
	}
	if i >= 0 {
		c.Spec.Drivers = slices.Delete(c.Spec.Drivers, i, i+1)
	}
	c.Spec.Drivers = append(c.Spec.Drivers, want)
	return true
}

func sameDriver(a, b storagev1.CSINodeDriver) bool {
	count := func(d storagev1.CSINodeDriver) int64 {
		if d.Allocatable == nil || d.Allocatable.Count == nil {
			return -1
		}
		return int64(*d.Allocatable.Count)
	}
	ka, kb := slices.Clone(a.TopologyKeys), slices.Clone(b.TopologyKeys)
	sort.Strings(ka)
	sort.Strings(kb)
	return a.NodeID == b.NodeID && slices.Equal(ka, kb) && count(a) == count(b)
}

// updateNode applies f to the Node and writes it when f changed it,
// retrying conflicts.
func (n *NodeInfo) updateNode(ctx context.Context, f func(*v1.Node) (bool, error)) error {
	return retry.RetryOnConflict(updateBackoff, func() error {
		node, err := n.Nodes.Get(ctx, n.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node = node.DeepCopy()
		changed, err := f(node)
		if err != nil || !changed {
			return err
		}
		_, err = n.Nodes.Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
}

// updateCSINode applies f to the CSINode (created empty, owned by the Node,
// when missing) and writes it when f changed it, retrying conflicts.
func (n *NodeInfo) updateCSINode(ctx context.Context, f func(*storagev1.CSINode) bool) error {
	return retry.RetryOnConflict(updateBackoff, func() error {
		c, err := n.CSINodes.Get(ctx, n.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			c, err = n.createCSINode(ctx)
		}
		if err != nil {
			return err
		}
		c = c.DeepCopy()
		if !f(c) {
			return nil
		}
		_, err = n.CSINodes.Update(ctx, c, metav1.UpdateOptions{})
		return err
	})
}

// createCSINode is kubelet's CreateCSINode: no drivers, an owner reference
// to the Node (so it goes with it), the migrated-plugins annotation.
func (n *NodeInfo) createCSINode(ctx context.Context) (*storagev1.CSINode, error) {
	node, err := n.Nodes.Get(ctx, n.NodeName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	c := &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{
			Name: n.NodeName,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
			}},
		},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{}},
	}
	setMigrationAnnotation(c)
	return n.CSINodes.Create(ctx, c, metav1.CreateOptions{})
}

// Initialize is kubelet's InitializeCSINodeWithAnnotation, run once the
// Node is registered: the CSINode is created when missing, and its
// storage.alpha.kubernetes.io/migrated-plugins annotation set, before any
// driver registers (the attach/detach controller reads it to attach the
// node's in-tree volumes through CSI).
func (n *NodeInfo) Initialize(ctx context.Context) error {
	if err := n.updateCSINode(ctx, setMigrationAnnotation); err != nil {
		return fmt.Errorf("error updating CSINode annotation: %v", err)
	}
	return nil
}
