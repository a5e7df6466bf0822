package pods

import (
	"errors"
	"fmt"
	"testing"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeagent/nodeagent/pods/volume"
)

func TestSandboxEventsFailedMount(t *testing.T) {
	rec := &msgRecorder{}
	d := &workerDeps{rec: rec}
	err := errors.Join(&volume.MountError{Volume: "a", Err: errors.New(`secret "s" not found`)}, &volume.MountError{Volume: "b", Err: errors.New("x")})
	sandboxEvents(d.event, nil, err)
	sandboxEvents(d.event, nil, errors.New("network namespace: boom"))
	want := []string{
		`Warning FailedMount MountVolume.SetUp failed for volume "a" : secret "s" not found`,
		`Warning FailedMount MountVolume.SetUp failed for volume "b" : x`,
		`Warning FailedCreatePodSandBox Failed to create pod sandbox: network namespace: boom`,
	}
	if len(rec.events) != len(want) {
		t.Fatalf("events %q, want %q", rec.events, want)
	}
	for i := range want {
		if rec.events[i] != want[i] {
			t.Errorf("event %d = %q, want %q", i, rec.events[i], want[i])
		}
	}
}

// msgRecorder keeps "type reason message" of each event.
type msgRecorder struct{ events []string }

func (r *msgRecorder) Event(_ k8sruntime.Object, typ, reason, msg string) {
	r.events = append(r.events, typ+" "+reason+" "+msg)
}

func (r *msgRecorder) Eventf(o k8sruntime.Object, typ, reason, f string, args ...any) {
	r.Event(o, typ, reason, fmt.Sprintf(f, args...))
}
