package pods

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pods/containerspec"
)

// ObjectGetter reads one kind of API object for the pod with uid (which
// becomes one of its users), by namespace and name. *objcache.Cache, kept
// current by a watch per object, implements it.
type ObjectGetter[T any] interface {
	Get(ctx context.Context, uid types.UID, namespace, name string) (T, error)
}

// Services lists the cluster's Services for the service-link variables.
type Services interface {
	// List returns every Service; an error when they have not been read
	// yet (with wait, after waiting a little for the first read).
	List(ctx context.Context, wait bool) ([]*v1.Service, error)
}

// envOf resolves the sources of a container's environment
// (containerspec.Env) with what the worker knows: the node's and the pod's addresses, the Services (waiting for
// their first list for API pods, as kubelet), the node's allocatable when
// a resourceFieldRef needs it, and the ConfigMaps and Secrets of the pod's
// namespace through the agent's caches. The first read of an object by a
// pod's worker goes to the API server (kubelet refetches an object when a
// pod that references it is registered); later reads may be served from
// the cache.
func (w *worker) envOf(ctx context.Context, pod *v1.Pod, c *v1.Container) (containerspec.Env, error) {
	static := kubetypes.IsStaticPod(pod) || w.source == kubetypes.SourceFile
	in := containerspec.Env{NodeName: w.d.nodeName, HostIPs: w.d.allHostIPs(), PodIPs: w.podIPsOf(pod)}
	if w.d.services != nil {
		svcs, err := w.d.services.List(ctx, !static)
		switch {
		case err == nil:
			in.Services = svcs
		case !static:
			// kubelet does not start an API pod's container before the
			// Services were read once (KUBERNETES_SERVICE_HOST must be
			// there for in-cluster clients).
			return containerspec.Env{}, err
		}
	}
	if needsAllocatable(c) && w.d.nodeAnyway != nil {
		node, err := w.d.nodeAnyway(ctx)
		if err != nil || node == nil {
			return containerspec.Env{}, fmt.Errorf("failed to find node object, expected a node")
		}
		in.Allocatable = node.Status.Allocatable
	}
	if !static && w.d.configMaps != nil {
		in.ConfigMap = func(name string) (*v1.ConfigMap, error) {
			return w.d.configMaps.Get(ctx, w.uid, pod.Namespace, name)
		}
	}
	if !static && w.d.secrets != nil {
		in.Secret = func(name string) (*v1.Secret, error) {
			return w.d.secrets.Get(ctx, w.uid, pod.Namespace, name)
		}
	}
	return in, nil
}

func needsAllocatable(c *v1.Container) bool {
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil {
			return true
		}
	}
	return false
}

// allHostIPs is status.hostIPs (the node's IP alone when the Manager
// gives no list).
func (d *workerDeps) allHostIPs() []string {
	if d.hostIPs != nil {
		return d.hostIPs()
	}
	if ip := d.hostIP(); ip != "" {
		return []string{ip}
	}
	return nil
}
