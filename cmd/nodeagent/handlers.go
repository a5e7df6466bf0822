package main

import (
	"context"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/runtime"
)

// runtimeHandlers keeps the node's runtime handlers and their features
// for status.runtimeHandlers: asking containerd runs the runtime's
// features command, so the answer is kept and refreshed in the background
// every handlersRefresh, never while the status is computed.
type runtimeHandlers struct {
	rt       func() *runtime.Runtime
	handlers map[string]string // RuntimeClass handler → containerd runtime type

	mu         sync.Mutex
	value      []v1.NodeRuntimeHandler
	at         time.Time
	refreshing bool
}

const handlersRefresh = 5 * time.Minute

// get returns the last answer (nil before the first) and starts a refresh
// when it is older than handlersRefresh.
func (h *runtimeHandlers) get() []v1.NodeRuntimeHandler {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.rt != nil && !h.refreshing && time.Since(h.at) >= handlersRefresh {
		if rt := h.rt(); rt != nil {
			h.refreshing = true
			go h.refresh(rt)
		}
	}
	return h.value
}

func (h *runtimeHandlers) refresh(rt *runtime.Runtime) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := append([]string{""}, slices.Sorted(func(yield func(string) bool) {
		for n := range h.handlers {
			if !yield(n) {
				return
			}
		}
	})...)
	out := make([]v1.NodeRuntimeHandler, 0, len(names))
	ok := true
	for _, n := range names {
		userns, err := rt.SupportsUserNamespaces(ctx, h.handlers[n])
		if err != nil {
			ok = false
			break
		}
		rro := false // nodeagent does not make recursive read-only mounts
		out = append(out, v1.NodeRuntimeHandler{Name: n, Features: &v1.NodeRuntimeHandlerFeatures{
			RecursiveReadOnlyMounts: &rro, UserNamespaces: &userns}})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refreshing = false
	if ok {
		h.value, h.at = out, time.Now()
	}
}
