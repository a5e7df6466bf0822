// Package mirror keeps static pods' mirror pods in the API server, as
// kubelet's mirror client: a static pod has exactly one mirror pod, with
// its config hash in the kubernetes.io/config.mirror annotation and the
// Node as its controlling owner; an outdated mirror pod (its manifest
// changed) is replaced, and mirror pods whose static pod is gone are
// deleted. Deletes are zero-grace with a UID precondition, so a pod
// re-created under the same name is never touched. All methods are safe to
// call concurrently; each API call has its own deadline.
package mirror

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/kubetypes"
)

// requestTimeout bounds each API call.
const requestTimeout = 10 * time.Second

// Client creates and deletes mirror pods.
type Client struct {
	client PodsGetter
	lister corelisters.PodLister // the node's pods, mirror pods included
	node   func() *v1.Node       // the registered Node; nil until then
	log    *slog.Logger
}

// PodClient is what the mirror client uses of one namespace's Pods:
// client-go's typed client (and its fake) and internal/kubeclient's satisfy
// it.
type PodClient interface {
	Create(ctx context.Context, pod *v1.Pod, opts metav1.CreateOptions) (*v1.Pod, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// PodsGetter returns the Pods client of a namespace.
type PodsGetter func(namespace string) PodClient

// New returns a Client. lister lists the API server's pods of this node;
// node returns the registered Node (for the owner reference), nil before.
func New(client PodsGetter, lister corelisters.PodLister, node func() *v1.Node, log *slog.Logger) *Client {
	return &Client{client: client, lister: lister, node: node, log: log}
}

// Ensure makes sure a static pod has its mirror pod. It reports false when
// it could not (yet: the node is not registered, the API server failed) and
// should be tried again soon.
func (c *Client) Ensure(ctx context.Context, pod *v1.Pod) bool {
	hash := pod.Annotations[kubetypes.AnnotationConfigHash]
	cur, err := c.lister.Pods(pod.Namespace).Get(pod.Name)
	if err == nil {
		if !kubetypes.IsMirrorPod(cur) {
			c.log.Warn("a pod that is not a mirror pod has the static pod's name; not creating a mirror pod", "pod", kubetypes.FullName(pod))
			return true
		}
		if cur.Annotations[kubetypes.AnnotationConfigMirror] == hash && cur.DeletionTimestamp == nil {
			return true
		}
		// An outdated mirror pod (the manifest changed), or one being
		// deleted by someone: delete it for good and make a new one.
		if err := c.delete(ctx, cur); err != nil {
			c.log.Warn("cannot delete an outdated mirror pod", "pod", kubetypes.FullName(pod), "err", err)
			return false
		}
	}
	node := c.node()
	if node == nil {
		return false // not registered yet
	}
	mp := pod.DeepCopy()
	mp.UID, mp.ResourceVersion, mp.Status = "", "", v1.PodStatus{}
	mp.Annotations[kubetypes.AnnotationConfigMirror] = hash
	mp.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: utilptr.To(true),
	}}
	cctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if _, err := c.client(pod.Namespace).Create(cctx, mp, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		c.log.Warn("cannot create the mirror pod", "pod", kubetypes.FullName(pod), "err", err)
		return false
	}
	c.log.Info("created mirror pod", "pod", kubetypes.FullName(pod))
	return true
}

// Delete removes a static pod's mirror pod (if it is this version's).
func (c *Client) Delete(ctx context.Context, pod *v1.Pod) error {
	cur, err := c.lister.Pods(pod.Namespace).Get(pod.Name)
	if err != nil || !kubetypes.IsMirrorPod(cur) || cur.Annotations[kubetypes.AnnotationConfigMirror] != pod.Annotations[kubetypes.AnnotationConfigHash] {
		return nil
	}
	if err := c.delete(ctx, cur); err != nil {
		return fmt.Errorf("delete mirror pod: %w", err)
	}
	return nil
}

// DeleteOrphans deletes the mirror pods whose static pod is not in static
// (full name → config hash of the static pods the agent runs).
func (c *Client) DeleteOrphans(ctx context.Context, static map[string]string) {
	pods, err := c.lister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, mp := range pods {
		if !kubetypes.IsMirrorPod(mp) || mp.DeletionTimestamp != nil {
			continue
		}
		if h, ok := static[kubetypes.FullName(mp)]; ok && h == mp.Annotations[kubetypes.AnnotationConfigMirror] {
			continue
		}
		c.log.Info("deleting a mirror pod without its static pod", "pod", kubetypes.FullName(mp))
		if err := c.delete(ctx, mp); err != nil {
			c.log.Warn("cannot delete an orphaned mirror pod", "pod", kubetypes.FullName(mp), "err", err)
		}
	}
}

// delete deletes mp (zero grace, its UID only); already gone is success.
func (c *Client) delete(ctx context.Context, mp *v1.Pod) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	err := c.client(mp.Namespace).Delete(ctx, mp.Name, metav1.DeleteOptions{
		GracePeriodSeconds: utilptr.To[int64](0),
		Preconditions:      metav1.NewUIDPreconditions(string(mp.UID)),
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
