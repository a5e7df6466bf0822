package pleg

import (
	"context"
	"fmt"
	"time"

	"github.com/nodeagent/nodeagent/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Runtime is what the PLEG needs from the container runtime; *runtime.Runtime
// implements it.
type Runtime interface {
	// ListContainers lists every pod container with its state.
	ListContainers(ctx context.Context) ([]runtime.Container, error)
	// InspectContainer returns one container; an error matching
	// runtime.ErrNotFound means it no longer exists.
	InspectContainer(ctx context.Context, id string) (runtime.Container, error)
	// Subscribe follows runtime events until ctx is cancelled (see
	// runtime.Runtime.Subscribe for the stream-up/down contract).
	Subscribe(ctx context.Context) <-chan runtime.Event
}

var _ Runtime = (*runtime.Runtime)(nil)

// EventType is the type of a pod lifecycle event.
type EventType string

// Event types, with kubelet's generic PLEG semantics.
const (
	// ContainerStarted: the container is now running.
	ContainerStarted EventType = "ContainerStarted"
	// ContainerDied: the container is now exited (or vanished while running).
	ContainerDied EventType = "ContainerDied"
	// ContainerRemoved: the container no longer exists.
	ContainerRemoved EventType = "ContainerRemoved"
	// ContainerChanged: the container is in another state (created, unknown).
	ContainerChanged EventType = "ContainerChanged"
)

// Source says what detected a change.
type Source string

const (
	// SourceRelist: a relist (periodic, fallback or after a stream gap).
	SourceRelist Source = "relist"
	// SourceContainerd: a containerd task or container event.
	SourceContainerd Source = "containerd"
	// SourceCgroups: a cgroup directory or cgroup.events change (inotify).
	// The configuration spells it the same (config.EventSourceCgroups).
	SourceCgroups Source = "cgroups"
)

// ParseSource validates a source name from configuration: "containerd" or
// "cgroups", as the configuration spells them.
func ParseSource(s string) (Source, error) {
	switch Source(s) {
	case SourceContainerd, SourceCgroups:
		return Source(s), nil
	}
	return "", fmt.Errorf("pleg: unknown event source %q (want %q or %q)", s, SourceContainerd, SourceCgroups)
}

// Event is a pod lifecycle event.
type Event struct {
	// Time is when the PLEG detected the change.
	Time        time.Time `json:"time"`
	PodUID      types.UID `json:"podUID"`
	Pod         string    `json:"pod"` // namespace/name
	ContainerID string    `json:"containerID"`
	Container   string    `json:"container"` // container name
	Type        EventType `json:"type"`
	Source      Source    `json:"source"`
	// ExitCode of the container, for ContainerDied when known.
	ExitCode *int32 `json:"exitCode,omitempty"`
	// triggeredAt is when the upstream signal arrived (for the latency metric).
	triggeredAt time.Time
}

// Expectation is an event a pod worker's own action will cause (for
// example ContainerStarted for the container it just started).
type Expectation struct {
	PodUID      types.UID
	ContainerID string
	Type        EventType
	// Deadline after which the expectation is given up (logged, counted).
	Deadline time.Time
}
