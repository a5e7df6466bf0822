package pods

import (
	"context"
	"errors"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Projector writes a pod's projected volumes (STUB: being implemented).
type Projector struct {
	client kubernetes.Interface
	clock  clock.Clock
	log    *slog.Logger
}

// NewProjector returns a Projector that reads through client.
func NewProjector(client kubernetes.Interface, clk clock.Clock, log *slog.Logger) *Projector {
	return &Projector{client: client, clock: clk, log: log}
}

// Setup writes every projected volume of pod under podDir and returns
// volume name → host directory, and when Setup must run again to refresh
// them (zero: never).
func (p *Projector) Setup(ctx context.Context, pod *v1.Pod, podDir string) (map[string]string, time.Time, error) {
	return nil, time.Time{}, errors.New("projected volumes are not implemented")
}

func hasProjected(pod *v1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Projected != nil {
			return true
		}
	}
	return false
}
