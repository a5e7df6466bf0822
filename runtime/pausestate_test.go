package runtime

import (
	"testing"

	tasktypes "github.com/containerd/containerd/api/types/task"
)

// containerd answers UNKNOWN when a shim does not answer in time: a pause
// in that state may run and must not be taken for dead.
func TestPauseState(t *testing.T) {
	for _, tc := range []struct {
		in   tasktypes.Status
		want State
	}{
		{tasktypes.Status_RUNNING, StateRunning},
		{tasktypes.Status_PAUSED, StateRunning},
		{tasktypes.Status_UNKNOWN, StateUnknown},
		{tasktypes.Status_STOPPED, StateExited},
		{tasktypes.Status_CREATED, StateExited},
	} {
		if got := pauseState(tc.in); got != tc.want {
			t.Errorf("pauseState(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
