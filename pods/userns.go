package pods

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"golang.org/x/sys/unix"

	"github.com/nodeagent/nodeagent/internal/netns"
	"github.com/nodeagent/nodeagent/runtime"
	"github.com/nodeagent/nodeagent/userns"
)

// UserNamespaces gives pods with hostUsers: false their user namespace
// (kubelet's UsernsManager; see package userns).
type UserNamespaces interface {
	// Mappings returns the user namespace of pod, whose containers run
	// with runtime type runtimeType of RuntimeClass handler handler (""
	// without a RuntimeClass): nil for a pod in the host's (hostUsers
	// unset or true), else its IDs, allocated and persisted on first use.
	// A runtime that cannot run it is kubelet's error.
	Mappings(ctx context.Context, pod *v1.Pod, handler, runtimeType string) (*runtime.UserNamespace, error)
	// Release frees a pod's IDs (its containers are gone).
	Release(uid types.UID) error
	// ReleaseOrphans frees the IDs of pods neither known nor on disk.
	ReleaseOrphans(known func(types.UID) bool) error
}

// UserNamespaceSupport reports whether containers of a runtime type can
// run in a user namespace (*runtime.Runtime's SupportsUserNamespaces).
type UserNamespaceSupport func(ctx context.Context, runtimeType string) (bool, error)

// NewUserNamespaces is UserNamespaces over an allocator and the runtime's
// support. A runtime type found able is not asked again; one found unable
// is asked again at the pod's next sync (containerd may be upgraded under
// the agent), as kubelet re-reads the runtime's handlers.
func NewUserNamespaces(m *userns.Manager, supports UserNamespaceSupport) UserNamespaces {
	return &userNamespaces{m: m, supports: supports, able: map[string]bool{}}
}

type userNamespaces struct {
	m        *userns.Manager
	supports UserNamespaceSupport
	mu       sync.Mutex
	able     map[string]bool
}

func (u *userNamespaces) Mappings(ctx context.Context, pod *v1.Pod, handler, runtimeType string) (*runtime.UserNamespace, error) {
	if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
		return nil, nil
	}
	u.mu.Lock()
	able := u.able[runtimeType]
	u.mu.Unlock()
	if !able {
		ok, err := u.supports(ctx, runtimeType)
		if err != nil || !ok {
			return nil, unsupportedUserns(handler, err)
		}
		u.mu.Lock()
		u.able[runtimeType] = true
		u.mu.Unlock()
	}
	ms, err := u.m.GetOrCreate(pod.UID)
	if err != nil {
		return nil, err
	}
	out := &runtime.UserNamespace{}
	for _, m := range ms.UIDMappings {
		out.UIDs = append(out.UIDs, runtime.IDMapping{ContainerID: m.ContainerID, HostID: m.HostID, Size: m.Length})
	}
	for _, m := range ms.GIDMappings {
		out.GIDs = append(out.GIDs, runtime.IDMapping{ContainerID: m.ContainerID, HostID: m.HostID, Size: m.Length})
	}
	return out, nil
}

// unsupportedUserns is kubelet's refusal of a hostUsers: false pod whose
// runtime cannot make user namespaces (userns manager's messages).
func unsupportedUserns(handler string, err error) error {
	msg := "can't set `spec.hostUsers: false`, runtime does not support user namespaces"
	if handler != "" {
		msg = fmt.Sprintf("can't set `spec.hostUsers: false`, RuntimeClass handler %q does not support user namespaces", handler)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", msg, err)
	}
	return errors.New(msg)
}

func (u *userNamespaces) Release(uid types.UID) error { return u.m.Release(uid) }

func (u *userNamespaces) ReleaseOrphans(known func(types.UID) bool) error {
	return u.m.ReleaseOrphans(known)
}

// handlerOf is the RuntimeClass handler a pod's runtime type came from (""
// for a pod without a RuntimeClass).
func handlerOf(pod *v1.Pod, handlers map[string]string, runtimeType string) string {
	if pod.Spec.RuntimeClassName == nil {
		return ""
	}
	for h, t := range handlers {
		if t == runtimeType {
			return h
		}
	}
	return *pod.Spec.RuntimeClassName
}

// resolveUserNamespace sets the worker's user namespace for the pod,
// allocating its IDs on first use (kubelet asks for them when it makes
// the sandbox). The error is kubelet's, reported as FailedCreatePodSandBox.
func (w *worker) resolveUserNamespace(ctx context.Context, pod *v1.Pod) error {
	if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
		w.ns.user = nil
		return nil
	}
	if w.d.userns == nil {
		return unsupportedUserns("", nil)
	}
	rt := ""
	if w.runtimeType != nil {
		rt = *w.runtimeType
	}
	ns, err := w.d.userns.Mappings(ctx, pod, handlerOf(pod, w.d.runtimeHandlers, rt), rt)
	if err != nil {
		return err
	}
	if ns != nil {
		ns.Path = filepath.Join(w.ns.dir, netns.UserFile)
	}
	w.ns.user = ns
	return nil
}

// userPodNamespaces makes a pod's user namespace and, owned by it, its
// network, IPC and UTS namespaces (hostPodNS: internal/netns
// CreateUserPod); the usual setup then finds them in place.
type userPodNamespaces interface {
	CreateUser(dir, netPath string, o netns.PodNamespaces, u *runtime.UserNamespace) error
	// HasUser reports whether dir holds a pod's user namespace.
	HasUser(dir string) bool
}

func (hostPodNS) HasUser(dir string) bool {
	return netns.IsNS(filepath.Join(dir, netns.UserFile), unix.CLONE_NEWUSER)
}

func (hostPodNS) CreateUser(dir, netPath string, o netns.PodNamespaces, u *runtime.UserNamespace) error {
	conv := func(ms []runtime.IDMapping) []netns.IDMap {
		out := make([]netns.IDMap, 0, len(ms))
		for _, m := range ms {
			out = append(out, netns.IDMap{ContainerID: int(m.ContainerID), HostID: int(m.HostID), Size: int(m.Size)})
		}
		return out
	}
	return netns.CreateUserPod(dir, netPath, o, conv(u.UIDs), conv(u.GIDs))
}

// setupUserNamespace makes the pod's user namespace before its network
// namespace (which it must own) is made and attached.
func (w *worker) setupUserNamespace(pod *v1.Pod) error {
	if w.ns.user == nil {
		return nil
	}
	mk, ok := w.d.podNS.(userPodNamespaces)
	if !ok || w.d.podNS == nil {
		return unsupportedUserns("", errors.New("no holder of pod namespaces"))
	}
	netPath := ""
	if !pod.Spec.HostNetwork {
		netPath = w.netnsPath()
	}
	o := netns.PodNamespaces{IPC: !pod.Spec.HostIPC, UTS: !pod.Spec.HostNetwork}
	if err := mk.CreateUser(w.ns.dir, netPath, o, w.ns.user); err != nil {
		return fmt.Errorf("user namespace: %w", err)
	}
	return nil
}

// startsUserNamespacedPod reports whether this sync of pod makes the
// sandbox of a pod with hostUsers: false: its user namespace, made with
// the sandbox and kept until the sandbox is released, is not in place yet
// (after an agent restart a running pod's is). kubelet counts such a sync
// in kubelet_started_user_namespaced_pods_total, and, when anything in it
// fails, in kubelet_started_user_namespaced_pods_errors_total
// (kuberuntime's SyncPod when it creates a sandbox); so does the worker.
func (w *worker) startsUserNamespacedPod(pod *v1.Pod) bool {
	if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
		return false
	}
	mk, ok := w.d.podNS.(userPodNamespaces)
	return !ok || !mk.HasUser(w.ns.dir)
}
