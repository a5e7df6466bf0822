package pods

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/pods/containerspec"
)

// runtimeClassHandler returns the handler of a RuntimeClass (from the API
// server, as kubelet's RuntimeClass manager).
type runtimeClassHandler func(ctx context.Context, name string) (string, error)

func apiRuntimeClassHandler(c RuntimeClassGetter) runtimeClassHandler {
	return func(ctx context.Context, name string) (string, error) {
		rc, err := c.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("RuntimeClass %q: %w", name, err)
		}
		return rc.Handler, nil
	}
}

// resolveRuntime sets the worker's runtime type from the pod's
// RuntimeClass, once (a pod's runtimeClassName does not change).
func (w *worker) resolveRuntime(ctx context.Context, pod *v1.Pod) error {
	if w.runtimeType != nil {
		return nil
	}
	t, err := containerspec.RuntimeType(ctx, pod, w.d.runtimeClass, w.d.runtimeHandlers)
	if err != nil {
		return err
	}
	w.runtimeType = &t
	return nil
}
