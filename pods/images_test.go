package pods

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pods/keyring"
	"github.com/nodeagent/nodeagent/pods/status"
	"github.com/nodeagent/nodeagent/runtime"
)

func (r *fakeRuntime) pullAttempt(auth *runtime.RegistryAuth) error {
	user := ""
	if auth != nil {
		user = auth.Username
	}
	r.auths = append(r.auths, user)
	if r.pullFail != nil {
		return r.pullFail(auth)
	}
	return nil
}

type fakeSecrets map[string]*v1.Secret

func (f fakeSecrets) Get(_ context.Context, _ types.UID, ns, name string) (*v1.Secret, error) {
	if s, ok := f[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secret"}, name)
}

type fakeNodeKeyring struct{ k keyring.Keyring }

func (f *fakeNodeKeyring) Lookup(repo string) []keyring.Cred { return f.k.Lookup(repo) }

// pullRecorder keeps each event as "reason: message".
type pullRecorder struct {
	mu  sync.Mutex
	evs []string
}

func (r *pullRecorder) Event(_ k8sruntime.Object, _, reason, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, reason+": "+msg)
}
func (r *pullRecorder) Eventf(o k8sruntime.Object, t, reason, f string, args ...any) {
	r.Event(o, t, reason, fmt.Sprintf(f, args...))
}

func (r *pullRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.evs
	r.evs = nil
	return out
}

func dockerConfigJSON(name, registry, user, pass string) *v1.Secret {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	s := &v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{
		v1.DockerConfigJsonKey: []byte(`{"auths":{"` + registry + `":{"auth":"` + auth + `"}}}`)}}
	s.Name, s.Namespace = name, "default"
	return s
}

func unauthorized(auth *runtime.RegistryAuth) error {
	if auth != nil && auth.Username == "right" {
		return nil
	}
	return errors.New(`failed to resolve reference: unexpected status from HEAD request: 401 Unauthorized`)
}

// The pod's pull secrets' credentials that match the image come first, most
// specific first, then the node's; each is tried until one works. A missing
// secret is skipped with kubelet's event; an unmatched one is not offered.
func TestWorkerPullCredentials(t *testing.T) {
	e := newWorkerEnv(t)
	rec := &pullRecorder{}
	e.deps.rec = rec
	e.rt.images = map[string]bool{}
	e.rt.pullFail = unauthorized
	dockercfg := &v1.Secret{Type: v1.SecretTypeDockercfg, Data: map[string][]byte{
		v1.DockerConfigKey: []byte(`{"https://registry.example.com":{"username":"right","password":"p"}}`)}}
	e.deps.secrets = fakeSecrets{
		"default/team":  dockerConfigJSON("team", "registry.example.com/team", "wrong", "x"),
		"default/cfg":   dockercfg,
		"default/other": dockerConfigJSON("other", "quay.io", "quay", "q"),
	}
	node := &fakeNodeKeyring{}
	node.k.Add("node", keyring.Config{"registry.example.com": {Username: "node", Password: "n"}})
	e.deps.nodeKeyring = node
	c := ctr("app")
	c.Image = "registry.example.com/team/app:v1"
	pod := testPod("private", v1.RestartPolicyAlways, c)
	pod.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "missing"}, {Name: "other"}, {Name: ""}, {Name: "team"}, {Name: "cfg"}}
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)

	if want := []string{"wrong", "right"}; !reflect.DeepEqual(e.rt.auths, want) {
		t.Fatalf("pull attempts with %v, want %v", e.rt.auths, want)
	}
	if len(e.rt.running()) != 1 {
		t.Fatalf("running %v", e.rt.running())
	}
	evs := strings.Join(rec.take(), "\n")
	for _, want := range []string{
		"FailedToRetrieveImagePullSecret: Unable to retrieve some image pull secrets (missing); attempting to pull the image may not succeed.",
		`Pulling: Pulling image "registry.example.com/team/app:v1"`,
		`Pulled: Successfully pulled image "registry.example.com/team/app:v1" in`,
	} {
		if !strings.Contains(evs, want) {
			t.Errorf("events lack %q:\n%s", want, evs)
		}
	}

	// Without secrets the node's credentials are used; without any
	// matching credentials the pull is anonymous.
	for _, tc := range []struct {
		image string
		want  []string
	}{
		{"registry.example.com/team/app:v2", []string{"node"}},
		{"elsewhere.example.com/app:v1", []string{""}},
	} {
		e.rt.auths = nil
		c := ctr("app")
		c.Image = tc.image
		w := e.worker(testPod("p-"+strings.Split(tc.image, "/")[0], v1.RestartPolicyAlways, c), kubetypes.SourceAPI)
		e.settle(w)
		if !reflect.DeepEqual(e.rt.auths, tc.want) {
			t.Errorf("%s: pulls with %v, want %v", tc.image, e.rt.auths, tc.want)
		}
	}
}

// An image already present (IfNotPresent) is not pulled: kubelet's Pulled
// event says so.
func TestWorkerImagePresent(t *testing.T) {
	e := newWorkerEnv(t)
	rec := &pullRecorder{}
	e.deps.rec = rec
	pod := testPod("present", v1.RestartPolicyAlways, ctr("app"))
	e.settle(e.worker(pod, kubetypes.SourceAPI))
	if e.rt.pulls != 0 {
		t.Fatalf("%d pulls", e.rt.pulls)
	}
	if evs := strings.Join(rec.take(), "\n"); !strings.Contains(evs, `Pulled: Container image "busybox:test" already present on machine`) {
		t.Fatalf("events:\n%s", evs)
	}
}

// A pull secret that is not valid JSON fails the pull with an error naming
// the secret and its key.
func TestWorkerPullSecretInvalid(t *testing.T) {
	e := newWorkerEnv(t)
	e.rt.images = map[string]bool{}
	bad := dockerConfigJSON("bad", "r.io", "u", "p")
	bad.Data[v1.DockerConfigJsonKey] = []byte(`{"auths":`)
	e.deps.secrets = fakeSecrets{"default/bad": bad}
	pod := testPod("bad", v1.RestartPolicyAlways, ctr("app"))
	pod.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "bad"}}
	w := e.worker(pod, kubetypes.SourceAPI)
	e.sync(w)
	wt := e.lastStatus(pod.UID).ContainerStatuses[0].State.Waiting
	if wt == nil || wt.Reason != status.ReasonErrImagePull || !strings.Contains(wt.Message, "image pull secret default/bad: data[.dockerconfigjson]") {
		t.Fatalf("waiting %+v", wt)
	}
	if e.rt.pulls != 0 {
		t.Fatalf("%d pulls", e.rt.pulls)
	}
}

// Kubelet's image pull back-off: a failed pull is ErrImagePull with the
// registry's error; until the back-off (10s, 20s, ... 5m) passes, syncs
// report ImagePullBackOff with kubelet's message and do not pull.
func TestWorkerImagePullBackOff(t *testing.T) {
	e := newWorkerEnv(t)
	rec := &pullRecorder{}
	e.deps.rec = rec
	e.rt.images = map[string]bool{}
	e.rt.pullFail = unauthorized
	c := ctr("app")
	c.Image = "registry.example.com/app:v1"
	pod := testPod("backoff", v1.RestartPolicyAlways, c)
	w := e.worker(pod, kubetypes.SourceAPI)
	waiting := func() *v1.ContainerStateWaiting {
		t.Helper()
		cs := e.lastStatus(pod.UID).ContainerStatuses
		if len(cs) != 1 {
			t.Fatalf("statuses %+v", cs)
		}
		return cs[0].State.Waiting
	}
	expect := func(step time.Duration, pulls int, reason string) {
		t.Helper()
		e.clk.Step(step)
		e.sync(w)
		if e.rt.pulls != pulls {
			t.Fatalf("after %v: %d pulls, want %d", step, e.rt.pulls, pulls)
		}
		if wt := waiting(); wt == nil || wt.Reason != reason {
			t.Fatalf("after %v: waiting %+v, want %s", step, wt, reason)
		}
	}
	expect(0, 1, status.ReasonErrImagePull)
	if wt := waiting(); !strings.Contains(wt.Message, "401 Unauthorized") {
		t.Fatalf("ErrImagePull message %q lacks the 401", wt.Message)
	}
	evs := strings.Join(rec.take(), "\n")
	for _, want := range []string{
		`Failed: Failed to pull image "registry.example.com/app:v1": failed to resolve reference: unexpected status from HEAD request: 401 Unauthorized`,
		"Failed: Error: ErrImagePull",
	} {
		if !strings.Contains(evs, want) {
			t.Errorf("events lack %q:\n%s", want, evs)
		}
	}
	expect(time.Second, 1, status.ReasonImagePullBackOff)
	want := `Back-off pulling image "registry.example.com/app:v1": ErrImagePull: failed to resolve reference: unexpected status from HEAD request: 401 Unauthorized`
	if wt := waiting(); wt.Message != want {
		t.Fatalf("ImagePullBackOff message %q, want %q", wt.Message, want)
	}
	evs = strings.Join(rec.take(), "\n")
	if !strings.Contains(evs, `BackOff: Back-off pulling image "registry.example.com/app:v1"`) || !strings.Contains(evs, "Failed: Error: ImagePullBackOff") {
		t.Errorf("back-off events:\n%s", evs)
	}
	expect(8*time.Second, 1, status.ReasonImagePullBackOff)
	expect(time.Second, 2, status.ReasonErrImagePull) // 10s passed
	expect(19*time.Second, 2, status.ReasonImagePullBackOff)
	expect(time.Second, 3, status.ReasonErrImagePull) // 20s passed
	e.rt.pullFail = nil
	expect(39*time.Second, 3, status.ReasonImagePullBackOff)
	e.clk.Step(time.Second) // 40s passed: the pull works
	e.settle(w)
	if e.rt.pulls != 4 || len(e.rt.running()) != 1 {
		t.Fatalf("%d pulls, running %v", e.rt.pulls, e.rt.running())
	}
}
