package pods

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/runtime"
)

// userRuntime is the fake runtime with the images' config users.
type userRuntime struct {
	*fakeRuntime
	users map[string]string
}

func (r userRuntime) ImageUser(_ context.Context, ref string) (string, error) {
	return r.users[ref], nil
}

func TestWorkerRunAsNonRoot(t *testing.T) {
	e := newWorkerEnv(t)
	e.deps.rt = userRuntime{e.rt, map[string]string{"root:img": "", "user:img": "1000"}}
	root, user := ctr("root"), ctr("user")
	root.Image, user.Image = "root:img", "user:img"
	pod := testPod("nonroot", v1.RestartPolicyAlways, root, user)
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: utilptr.To(true)}
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)

	running := e.rt.running()
	if _, ok := running["user"]; !ok || len(running) != 1 {
		t.Fatalf("running %v, want only the container whose image runs as 1000", running)
	}
	st := e.lastStatus(pod.UID)
	var waiting *v1.ContainerStateWaiting
	for _, cs := range st.ContainerStatuses {
		if cs.Name == "root" {
			waiting = cs.State.Waiting
		}
	}
	want := `container has runAsNonRoot and image will run as root (pod: "nonroot_default(uid-nonroot)", container: root)`
	if waiting == nil || waiting.Reason != "CreateContainerConfigError" || waiting.Message != want {
		t.Errorf("root container waiting %+v, want CreateContainerConfigError %q", waiting, want)
	}
	if !e.rec.has("Failed") {
		t.Error("no Failed event")
	}
	for id, s := range e.rt.specs {
		if s.Name == "user" && (s.Security.Seccomp != runtime.SeccompUnconfined || s.Security.NoNewPrivileges) {
			t.Errorf("container %s security %+v, want kubelet's defaults", id, s.Security)
		}
	}
}

// A pod whose RuntimeClass handler the node lacks does not start: it stays
// Pending with a FailedCreatePodSandBox event; one with a configured
// handler runs on its runtime.
func TestWorkerRuntimeClass(t *testing.T) {
	e := newWorkerEnv(t)
	e.deps.runtimeHandlers = map[string]string{"test-handler": "io.containerd.test.v1"}
	e.deps.runtimeClass = func(_ context.Context, name string) (string, error) { return name + "-handler", nil }

	bad := testPod("bad", v1.RestartPolicyNever, ctr("c"))
	bad.Spec.RuntimeClassName = utilptr.To("other")
	e.sync(e.worker(bad, kubetypes.SourceAPI))
	if len(e.rt.specs) != 0 || !e.rec.has("FailedCreatePodSandBox") {
		t.Errorf("containers %v, events %v: want none created and FailedCreatePodSandBox", e.rt.specs, e.rec.reasons)
	}
	if st := e.lastStatus(bad.UID); st.Phase != v1.PodPending {
		t.Errorf("phase %s, want Pending", st.Phase)
	}

	good := testPod("good", v1.RestartPolicyNever, ctr("c"))
	good.Spec.RuntimeClassName = utilptr.To("test")
	e.settle(e.worker(good, kubetypes.SourceAPI))
	if len(e.rt.specs) != 1 {
		t.Fatalf("containers %v, want one", e.rt.specs)
	}
	for _, s := range e.rt.specs {
		if s.RuntimeType != "io.containerd.test.v1" {
			t.Errorf("runtime type %q, want the handler's", s.RuntimeType)
		}
	}
}
