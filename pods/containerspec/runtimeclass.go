package containerspec

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// RuntimeType resolves a pod's runtimeClassName to the containerd runtime
// type of its handler ("" for a pod without one: the default). lookup
// returns a RuntimeClass's handler (from the API server, as kubelet's
// RuntimeClass manager; nil: no API server); handlers maps the node's
// handlers to containerd runtime types. A handler the node does not have
// is containerd's error, which kubelet reports as FailedCreatePodSandBox.
func RuntimeType(ctx context.Context, pod *v1.Pod, lookup func(ctx context.Context, name string) (string, error), handlers map[string]string) (string, error) {
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
		return "", fmt.Errorf("failed to get sandbox runtime: no runtime for %q is configured", h)
	}
	return t, nil
}
