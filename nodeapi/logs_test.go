package nodeapi

import (
	"context"
	"errors"
	"testing"

	"github.com/nodeagent/nodeagent/runtime"
)

// A follow lists the containers once to find its attempt, then inspects
// only that container: 100 idle follows must not list every container on
// the node 100 times a second.
func TestAttemptStateListsOnce(t *testing.T) {
	pod := testPod()
	f := &fakeContainers{cs: []runtime.Container{
		{ID: "old", Pod: runtime.PodRef{UID: pod.UID}, Name: "app", Attempt: 0, State: runtime.StateExited},
		{ID: "new", Pod: runtime.PodRef{UID: pod.UID}, Name: "app", Attempt: 1, State: runtime.StateRunning},
	}}
	s := &Server{opts: Options{Containers: f}}
	st := &attemptState{s: s, uid: pod.UID, name: "app", attempt: 1}
	ctx := context.Background()
	for i := range 3 {
		if !st.running(ctx) {
			t.Fatalf("check %d: attempt 1 runs", i)
		}
	}
	if f.lists != 1 || f.inspects != 2 {
		t.Fatalf("lists %d, inspects %d; want 1 and 2", f.lists, f.inspects)
	}
	f.inspectErr = errors.New("containerd is restarting")
	if !st.running(ctx) {
		t.Fatal("a runtime that cannot tell must not end the follow")
	}
	f.inspectErr = nil
	f.cs[1].State = runtime.StateUnknown // a shim slow to answer
	if !st.running(ctx) {
		t.Fatal("a container in unknown state must not end the follow")
	}
	f.cs[1].State = runtime.StateExited
	if st.running(ctx) {
		t.Fatal("exited attempt reported running")
	}
	f.cs = f.cs[:1]
	if st.running(ctx) {
		t.Fatal("removed container reported running")
	}
	if f.lists != 1 {
		t.Fatalf("lists %d after the first check, want 1", f.lists)
	}
	gone := &attemptState{s: s, uid: pod.UID, name: "app", attempt: 7}
	if gone.running(ctx) {
		t.Fatal("an attempt that was never listed runs")
	}
}
