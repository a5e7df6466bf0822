package pods

import (
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/runtime"
)

// toStop is killPlan less the containers that never started and that this
// worker already stopped: stopping a created container only deletes its
// task, and it stays "created" until the cleanup removes it (as kubelet,
// which kills only running containers). Without this a pod whose
// container was created but not started when the agent died (SIGKILL
// between create and start) was stopped again at every sync and never
// cleaned up.
func (w *worker) toStop(rs pleg.PodStatus) []runtime.Container {
	var out []runtime.Container
	for _, c := range killPlan(rs) {
		if c.State == runtime.StateCreated && w.tasks.reaped[c.ID] {
			continue
		}
		out = append(out, c)
	}
	return out
}

// expectsDeath reports whether stopping c ends in a ContainerDied event:
// a created container's state does not change when its task goes.
func expectsDeath(c runtime.Container) bool { return c.State != runtime.StateCreated }
