package pods

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// runtimeTypeFor resolves a pod's runtimeClassName to the containerd
// runtime type of its handler ("" for a pod without one: the default).
// A handler the node does not have is containerd's error, which kubelet
// reports as FailedCreatePodSandBox.
func runtimeTypeFor(ctx context.Context, pod *v1.Pod, lookup runtimeClassHandler, handlers map[string]string) (string, error) {
	if pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName == "" {
		return "", nil
	}
	if lookup == nil {
		return "", fmt.Errorf("RuntimeClass %q: no API server to look it up", *pod.Spec.RuntimeClassName)
	}
	h, err := lookup(ctx, *pod.Spec.RuntimeClassName)
	if err != nil {
		return "", err
	}
	t, ok := handlers[h]
	if !ok {
		return "", errNoRuntime(h)
	}
	return t, nil
}

func errNoRuntime(h string) error {
	return fmt.Errorf("failed to get sandbox runtime: no runtime for %q is configured", h)
}

// resolveRuntime sets the worker's runtime type from the pod's
// RuntimeClass, once (a pod's runtimeClassName does not change).
func (w *worker) resolveRuntime(ctx context.Context, pod *v1.Pod) error {
	if w.runtimeResolved {
		return nil
	}
	t, err := runtimeTypeFor(ctx, pod, w.d.runtimeClass, w.d.runtimeHandlers)
	if err != nil {
		return err
	}
	w.runtimeType, w.runtimeResolved = t, true
	return nil
}
