package pods

import (
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pods/pullmanager"
	"github.com/nodeagent/nodeagent/pods/status"
)

// With KubeletEnsureSecretPulledImages, an image pulled with team a's
// secret is served from the node to another pod with that secret, pulled
// again (and refused by the registry) for a pod without it, and refused
// with kubelet's ErrImageNeverPull message under pullPolicy Never. With
// the gate off, the cached image is served to anyone.
func TestWorkerSecretPulledImages(t *testing.T) {
	for _, gate := range []bool{true, false} {
		e := newWorkerEnv(t)
		rec := &pullRecorder{}
		e.deps.rec = rec
		e.rt.images = map[string]bool{}
		e.rt.pullFail = unauthorized
		good := dockerConfigJSON("regcred", "127.0.0.1:5000", "right", "p")
		good.UID = types.UID("uid-regcred")
		e.deps.secrets = fakeSecrets{"default/regcred": good}
		if gate {
			policy, _ := pullmanager.NewPolicy("", nil)
			m, err := pullmanager.New(t.TempDir(), policy, testclock.NewFakeClock(time.Now()))
			if err != nil {
				t.Fatal(err)
			}
			e.deps.pulls = m
		}
		const img = "127.0.0.1:5000/private/app:1"
		mk := func(name string, secret bool, policy v1.PullPolicy) *v1.Pod {
			c := ctr("app")
			c.Image, c.ImagePullPolicy = img, policy
			p := testPod(name, v1.RestartPolicyAlways, c)
			if secret {
				p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "regcred"}}
			}
			return p
		}
		e.settle(e.worker(mk("first", true, v1.PullIfNotPresent), kubetypes.SourceAPI))
		if !reflect.DeepEqual(e.rt.auths, []string{"right"}) {
			t.Fatalf("gate %v: first pull with %v", gate, e.rt.auths)
		}
		rec.take()

		e.rt.auths = nil
		e.settle(e.worker(mk("same-secret", true, v1.PullIfNotPresent), kubetypes.SourceAPI))
		if len(e.rt.auths) != 0 {
			t.Errorf("gate %v: a pod with the same secret pulled again (%v)", gate, e.rt.auths)
		}
		if gate && !strings.Contains(strings.Join(rec.take(), "\n"), `Pulled: Container image "`+img+`" already present on machine and can be accessed by the pod`) {
			t.Errorf("kubelet's event for an accessible cached image missing")
		}

		e.rt.auths = nil
		thief := mk("no-secret", false, v1.PullIfNotPresent)
		e.settle(e.worker(thief, kubetypes.SourceAPI))
		st := e.lastStatus(thief.UID)
		waiting := st.ContainerStatuses[0].State.Waiting
		if gate {
			if !reflect.DeepEqual(e.rt.auths, []string{""}) || waiting == nil || waiting.Reason != status.ReasonErrImagePull {
				t.Errorf("a pod without the secret: pulls %v, waiting %+v; want an anonymous pull refused (ErrImagePull)", e.rt.auths, waiting)
			}
		} else if len(e.rt.auths) != 0 || waiting != nil {
			t.Errorf("gate off: the cached image must be served to any pod (pulls %v, waiting %+v)", e.rt.auths, waiting)
		}

		never := mk("never", false, v1.PullNever)
		e.settle(e.worker(never, kubetypes.SourceAPI))
		if w := e.lastStatus(never.UID).ContainerStatuses[0].State.Waiting; gate &&
			(w == nil || w.Reason != status.ReasonErrImageNeverPull || w.Message != `Container image "`+img+`" is not present with pull policy of Never`) {
			t.Errorf("pullPolicy Never without the secret: %+v", w)
		}
	}
}
