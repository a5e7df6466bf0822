package resize

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/internal/atomicfile"
)

// kubelet's checkpoint file names, in its root directory.
const (
	AllocatedFile = "allocated_pods_state"
	ActuatedFile  = "actuated_pods_state"
)

// Store keeps, per pod, the resources allocated to its containers and the
// ones actuated (last set on its running containers), checkpointed to
// rootDir after every change, and the pod's resize conditions (in memory,
// as kubelet's status manager keeps them). Its methods may be called
// concurrently (pod workers, admission).
type Store struct {
	dir string

	mu        sync.Mutex
	allocated map[types.UID]Allocation
	actuated  map[types.UID]Allocation
	conds     map[types.UID]*conditions
}

type conditions struct {
	pending, inProgress *v1.PodCondition
}

// checkpoint is the file: kubelet's {"data": ..., "checksum": ...} with
// the data as kubelet's PodResourceCheckpointInfo ({"entries": {uid:
// {"ContainerResources": {name: requirements}}}}). The checksum is FNV-32a
// of data.
type checkpoint struct {
	Data     string `json:"data"`
	Checksum uint64 `json:"checksum"`
}

type checkpointData struct {
	Entries map[types.UID]podInfo `json:"entries,omitempty"`
}

type podInfo struct {
	ContainerResources map[string]v1.ResourceRequirements
}

// Open loads the checkpoints in rootDir. A missing file is an empty one; a
// corrupt one is an error (the caller decides whether to start empty).
func Open(rootDir string) (*Store, error) {
	s := &Store{dir: rootDir, conds: map[types.UID]*conditions{}}
	var errs []error
	var err error
	if s.allocated, err = load(filepath.Join(rootDir, AllocatedFile)); err != nil {
		errs = append(errs, err)
	}
	if s.actuated, err = load(filepath.Join(rootDir, ActuatedFile)); err != nil {
		errs = append(errs, err)
	}
	return s, errors.Join(errs...)
}

func load(path string) (map[types.UID]Allocation, error) {
	out := map[types.UID]Allocation{}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	var cp checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return out, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if sum(cp.Data) != cp.Checksum {
		return out, fmt.Errorf("checkpoint %s: checksum mismatch", path)
	}
	var d checkpointData
	if err := json.Unmarshal([]byte(cp.Data), &d); err != nil {
		return out, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	for uid, p := range d.Entries {
		out[uid] = p.ContainerResources
	}
	return out, nil
}

func sum(data string) uint64 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(data))
	return uint64(h.Sum32())
}

// save writes m to file atomically (temporary file, fsync, rename).
func (s *Store) save(file string, m map[types.UID]Allocation) error {
	d := checkpointData{Entries: map[types.UID]podInfo{}}
	for uid, a := range m {
		d.Entries[uid] = podInfo{ContainerResources: a}
	}
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	b, err := json.Marshal(checkpoint{Data: string(data), Checksum: sum(string(data))})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.dir, 0o750); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(s.dir, file), b)
}

// Allocated is pod uid's allocation, and whether it has one.
func (s *Store) Allocated(uid types.UID) (Allocation, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.allocated[uid]
	return clone(a), ok
}

// Actuated is what pod uid's containers were last set to.
func (s *Store) Actuated(uid types.UID) Allocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return clone(s.actuated[uid])
}

// SetAllocated checkpoints pod's containers' resources as its allocation.
func (s *Store) SetAllocated(pod *v1.Pod) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.allocated[pod.UID] = AllocationOf(pod)
	return s.save(AllocatedFile, s.allocated)
}

// SetActuated checkpoints what container name of pod uid was set to.
func (s *Store) SetActuated(uid types.UID, name string, r v1.ResourceRequirements) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.actuated[uid] == nil {
		s.actuated[uid] = Allocation{}
	}
	s.actuated[uid][name] = *r.DeepCopy()
	return s.save(ActuatedFile, s.actuated)
}

// Remove forgets pod uid.
func (s *Store) Remove(uid types.UID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conds, uid)
	_, a := s.allocated[uid]
	_, b := s.actuated[uid]
	if !a && !b {
		return nil
	}
	delete(s.allocated, uid)
	delete(s.actuated, uid)
	return errors.Join(s.save(AllocatedFile, s.allocated), s.save(ActuatedFile, s.actuated))
}

// SetPending sets (reason != "") or clears the pod's PodResizePending
// condition, observed at generation gen (kubelet's
// SetPodResizePendingCondition).
func (s *Store) SetPending(uid types.UID, reason, message string, gen int64, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.condsOf(uid)
	if reason == "" {
		c.pending = nil
		return
	}
	c.pending = updated(v1.PodResizePending, c.pending, reason, message, gen, now)
}

// SetInProgress sets the pod's PodResizeInProgress condition (kubelet's
// SetPodResizeInProgressCondition): reason "" while it proceeds, Error with
// the failure's message. An existing condition keeps its generation, and
// its reason and message when none are given; ClearInProgress first to
// start a new one.
func (s *Store) SetInProgress(uid types.UID, reason, message string, gen int64, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.condsOf(uid)
	if old := c.inProgress; old != nil {
		if reason == "" && message == "" {
			reason, message = old.Reason, old.Message
		}
		gen = old.ObservedGeneration
	}
	c.inProgress = updated(v1.PodResizeInProgress, c.inProgress, reason, message, gen, now)
}

// InProgress reports whether the pod's PodResizeInProgress is set.
func (s *Store) InProgress(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.conds[uid]
	return c != nil && c.inProgress != nil
}

// ClearInProgress clears PodResizeInProgress and reports whether it was
// set (the resize completed).
func (s *Store) ClearInProgress(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.condsOf(uid)
	was := c.inProgress != nil
	c.inProgress = nil
	return was
}

func (s *Store) condsOf(uid types.UID) *conditions {
	c := s.conds[uid]
	if c == nil {
		c = &conditions{}
		s.conds[uid] = c
	}
	return c
}

// updated is kubelet's updatedPodResizeCondition, except that an unchanged
// condition is returned as it is (the status does not change every sync):
// lastTransitionTime changes with the reason, lastProbeTime with anything.
func updated(t v1.PodConditionType, old *v1.PodCondition, reason, message string, gen int64, now time.Time) *v1.PodCondition {
	if old != nil && old.Reason == reason && old.Message == message && old.ObservedGeneration == gen {
		return old
	}
	c := &v1.PodCondition{
		Type: t, Status: v1.ConditionTrue, Reason: reason, Message: message, ObservedGeneration: gen,
		LastProbeTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now),
	}
	if old != nil && old.Reason == reason {
		c.LastTransitionTime = old.LastTransitionTime
	}
	return c
}

// Conditions are the pod's resize conditions for its status.
func (s *Store) Conditions(uid types.UID) []v1.PodCondition {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.conds[uid]
	if c == nil {
		return nil
	}
	var out []v1.PodCondition
	for _, p := range []*v1.PodCondition{c.pending, c.inProgress} {
		if p != nil {
			out = append(out, *p.DeepCopy())
		}
	}
	return out
}

func clone(a Allocation) Allocation {
	if a == nil {
		return nil
	}
	out := Allocation{}
	for k, r := range a {
		out[k] = *r.DeepCopy()
	}
	return out
}

// UIDs are the pods the store has allocations of.
func (s *Store) UIDs() []types.UID {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []types.UID
	for uid := range s.allocated {
		out = append(out, uid)
	}
	for uid := range s.actuated {
		if _, ok := s.allocated[uid]; !ok {
			out = append(out, uid)
		}
	}
	return out
}

// Deferred reports whether the pod's resize waits for room on the node
// (PodResizePending, Deferred).
func (s *Store) Deferred(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.conds[uid]
	return c != nil && c.pending != nil && c.pending.Reason == ReasonDeferred
}
