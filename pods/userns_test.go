package pods

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/netns"
	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/runtime"
	"github.com/nodeagent/nodeagent/userns"
)

// fakeUserPodNS is fakePodNS that also makes pods' user namespaces.
type fakeUserPodNS struct {
	fakePodNS
	users map[string]*runtime.UserNamespace // by directory
	nets  map[string]string                 // netns path by directory
}

func (f *fakeUserPodNS) CreateUser(dir, netPath string, o netns.PodNamespaces, u *runtime.UserNamespace) error {
	f.users[dir], f.nets[dir] = u, netPath
	return nil
}

func (f *fakeUserPodNS) HasUser(dir string) bool { return f.users[dir] != nil }

func (f *fakeUserPodNS) Remove(dir string) error {
	delete(f.users, dir)
	return f.fakePodNS.Remove(dir)
}

func newFakeUserPodNS() *fakeUserPodNS {
	return &fakeUserPodNS{fakePodNS: fakePodNS{created: map[string]netns.PodNamespaces{}},
		users: map[string]*runtime.UserNamespace{}, nets: map[string]string{}}
}

type memStore map[types.UID][]byte

func (s memStore) List() ([]types.UID, error) {
	var out []types.UID
	for uid := range s {
		out = append(out, uid)
	}
	return out, nil
}
func (s memStore) Read(uid types.UID) ([]byte, error) {
	if b, ok := s[uid]; ok {
		return b, nil
	}
	return nil, userns.ErrNotFound
}
func (s memStore) Write(uid types.UID, b []byte) error { s[uid] = b; return nil }
func (s memStore) Remove(uid types.UID) error          { delete(s, uid); return nil }

func newTestUserNamespaces(t *testing.T, supported bool) (UserNamespaces, *userns.Manager) {
	m, err := userns.New(memStore{}, userns.Options{Range: userns.Range{First: 65536, Length: 65536 * 4}, MaxPods: 4,
		RandIntN: func(int) int { return 1 }})
	if err != nil {
		t.Fatal(err)
	}
	return NewUserNamespaces(m, func(context.Context, string) (bool, error) { return supported, nil }), m
}

// kubelet's refusal, word for word (pkg/kubelet/userns).
func TestUnsupportedUsernsMessage(t *testing.T) {
	if got, want := unsupportedUserns("", nil).Error(), "can't set `spec.hostUsers: false`, runtime does not support user namespaces"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if got, want := unsupportedUserns("kata", nil).Error(), "can't set `spec.hostUsers: false`, RuntimeClass handler \"kata\" does not support user namespaces"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// On a runtime without user namespaces a hostUsers: false pod is not
// started: FailedCreatePodSandBox, Pending, no IDs allocated.
func TestWorkerUserNamespaceRefused(t *testing.T) {
	e := newWorkerEnv(t)
	u, m := newTestUserNamespaces(t, false)
	e.deps.userns = u
	pod := testPod("userns", v1.RestartPolicyNever, ctr("c"))
	pod.Spec.HostUsers = utilptr.To(false)
	e.sync(e.worker(pod, kubetypes.SourceAPI))
	if len(e.rt.specs) != 0 || !e.rec.has("FailedCreatePodSandBox") {
		t.Errorf("containers %v, events %v: want none and FailedCreatePodSandBox", e.rt.specs, e.rec.reasons)
	}
	if st := e.lastStatus(pod.UID); st.Phase != v1.PodPending {
		t.Errorf("phase %s", st.Phase)
	}
	if _, ok := m.Allocated(pod.UID); ok {
		t.Error("IDs allocated for a refused pod")
	}
}

// Where the runtime can, the pod gets a slot, its user namespace owns its
// network and IPC/UTS namespaces, every container joins it with the
// mappings, and the slot is freed with the pod.
func TestWorkerUserNamespace(t *testing.T) {
	e := newWorkerEnv(t)
	u, m := newTestUserNamespaces(t, true)
	fns := &fakeUserPodNS{fakePodNS: fakePodNS{created: map[string]netns.PodNamespaces{}},
		users: map[string]*runtime.UserNamespace{}, nets: map[string]string{}}
	e.deps.userns, e.deps.podNS, e.deps.podNSDir = u, fns, t.TempDir()
	pod := testPod("userns", v1.RestartPolicyNever, ctr("a"), ctr("b"))
	pod.Spec.HostUsers = utilptr.To(false)
	plain := testPod("plain", v1.RestartPolicyNever, ctr("c"))
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)
	e.settle(e.worker(plain, kubetypes.SourceAPI))

	dir := filepath.Join(e.deps.podNSDir, string(pod.UID))
	want := runtime.UserNamespace{UIDs: []runtime.IDMapping{{ContainerID: 0, HostID: 2 * 65536, Size: 65536}},
		GIDs: []runtime.IDMapping{{ContainerID: 0, HostID: 2 * 65536, Size: 65536}}, Path: filepath.Join(dir, netns.UserFile)}
	if got := fns.users[dir]; got == nil || got.Path != want.Path || got.UIDs[0] != want.UIDs[0] {
		t.Fatalf("pod user namespace made %+v, want %+v", got, want)
	}
	if fns.nets[dir] != w.netnsPath() {
		t.Errorf("user namespace owns netns %q, want the pod's %q", fns.nets[dir], w.netnsPath())
	}
	n := 0
	for _, s := range e.rt.specs {
		switch s.Pod.UID {
		case pod.UID:
			n++
			if s.UserNamespace == nil || s.UserNamespace.Path != want.Path || s.UserNamespace.GIDs[0] != want.GIDs[0] {
				t.Errorf("container %s user namespace %+v, want %+v", s.Name, s.UserNamespace, want)
			}
		case plain.UID:
			if s.UserNamespace != nil {
				t.Errorf("a hostUsers-unset pod's container has a user namespace %+v", s.UserNamespace)
			}
		}
	}
	if n != 2 {
		t.Fatalf("%d containers of the pod created, want 2", n)
	}
	w.remove()
	if _, done := e.settle(w); !done {
		t.Fatal("the worker did not end")
	}
	if _, ok := m.Allocated(pod.UID); ok {
		t.Error("the pod's IDs were not released with it")
	}
}

// kubelet_started_user_namespaced_pods_total counts the syncs that make a
// hostUsers: false pod's sandbox, and ..._errors_total those of them that
// failed, as kubelet's SyncPod counts them: not a sync that finds the
// sandbox in place, not a pod in the host's user namespace; a pod the
// runtime refuses fails to make its sandbox at every sync.
func TestUserNamespacedPodMetrics(t *testing.T) {
	e := newWorkerEnv(t)
	u, _ := newTestUserNamespaces(t, true)
	fns := newFakeUserPodNS()
	e.deps.userns, e.deps.podNS, e.deps.podNSDir = u, fns, t.TempDir()
	counts := func() (float64, float64) {
		return testutil.ToFloat64(e.deps.met.usernsStarted), testutil.ToFloat64(e.deps.met.usernsErrors)
	}
	check := func(step string, started, errs float64) {
		t.Helper()
		if s, f := counts(); s != started || f != errs {
			t.Errorf("%s: started %v, errors %v; want %v, %v", step, s, f, started, errs)
		}
	}

	ok := testPod("ok", v1.RestartPolicyAlways, ctr("c"))
	ok.Spec.HostUsers = utilptr.To(false)
	wok := e.worker(ok, kubetypes.SourceAPI)
	e.settle(wok)
	check("a started pod", 1, 0)
	e.settle(wok)
	check("its sandbox in place", 1, 0)

	plain := testPod("plain", v1.RestartPolicyAlways, ctr("c"))
	e.settle(e.worker(plain, kubetypes.SourceAPI))
	e.settle(e.worker(withHostUsers(testPod("host", v1.RestartPolicyAlways, ctr("c")), true), kubetypes.SourceAPI))
	check("pods in the host's user namespace", 1, 0)

	// Its container's image cannot be pulled: the sync that makes the
	// sandbox fails; the next ones find the sandbox and are not counted.
	e.rt.images = map[string]bool{"busybox:test": true}
	e.rt.pullFail = func(*runtime.RegistryAuth) error { return errors.New("no such image") }
	bad := testPod("bad", v1.RestartPolicyAlways, v1.Container{Name: "c", Image: "missing:1", ImagePullPolicy: v1.PullIfNotPresent})
	bad.Spec.HostUsers = utilptr.To(false)
	wbad := e.worker(bad, kubetypes.SourceAPI)
	e.sync(wbad)
	check("a pod whose container fails", 2, 1)
	e.sync(wbad)
	check("its next sync", 2, 1)

	// A runtime without user namespaces: the sandbox fails at every sync.
	e.deps.userns, _ = newTestUserNamespaces(t, false)
	refused := testPod("refused", v1.RestartPolicyAlways, ctr("c"))
	refused.Spec.HostUsers = utilptr.To(false)
	wref := e.worker(refused, kubetypes.SourceAPI)
	e.sync(wref)
	check("a refused pod", 3, 2)
	e.sync(wref)
	check("its retry", 4, 3)
}

func withHostUsers(p *v1.Pod, host bool) *v1.Pod {
	p.Spec.HostUsers = utilptr.To(host)
	return p
}
