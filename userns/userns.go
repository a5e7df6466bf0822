// Package userns hands out the host UID/GID ranges of pods that ask for a
// user namespace (spec.hostUsers: false), with kubelet's contract
// (UserNamespacesSupport, beta and on by default since 1.33):
//
//   - The agent owns one range of host IDs: the subordinate IDs of the
//     user "kubelet" in /etc/subuid and /etc/subgid when that user exists
//     (one line each, the same range in both), otherwise kubelet's default,
//     every ID from 65536 up to 2^32-1. The range must start at a multiple
//     of the IDs per pod (65536), at or above it, and hold at least maxPods
//     pods, or the agent does not start (kubelet's rules and messages).
//   - A pod gets one slot of 65536 IDs, the same for UIDs and GIDs, with
//     container ID 0 mapped to the slot's first host ID. Slots are picked
//     at random among the free ones, as kubelet picks them.
//   - The allocation is written to the pod's directory
//     (<rootDir>/pods/<uid>/userns, kubelet's file and JSON) before the pod
//     uses it, so that an agent restart reads every pod's mapping back and
//     never hands a slot out twice; it is freed (and the file removed) with
//     the pod.
//
// A Manager is safe for concurrent use.
package userns

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// IDsPerPod is kubelet's unit and default of IDs per pod
// (userNamespaces.idsPerPod).
const IDsPerPod = 65536

// Kubelet's default range when no subordinate IDs are configured: every ID
// from 65536 on.
const (
	DefaultFirstID = 1 << 16
	DefaultLength  = 1<<32 - DefaultFirstID
)

// FileName is the name of a pod's allocation in its directory (kubelet's).
const FileName = "userns"

// IDMapping maps Length IDs from ContainerID inside the namespace to HostID
// on the host. Its JSON is kubelet's.
type IDMapping struct {
	HostID      uint32 `json:"hostId"`
	ContainerID uint32 `json:"containerId"`
	Length      uint32 `json:"length"`
}

// Mappings is a pod's user namespace: its UID and GID mappings (kubelet's
// file format).
type Mappings struct {
	UIDMappings []IDMapping `json:"uidMappings"`
	GIDMappings []IDMapping `json:"gidMappings"`
}

// ErrNotFound is what a Store returns for a pod without an allocation.
var ErrNotFound = errors.New("no user namespace allocation")

// Store keeps pods' allocations (the files in pods' directories; see
// DirStore). Write must be durable when it returns.
type Store interface {
	// List returns the pods that may have an allocation (every pod
	// directory).
	List() ([]types.UID, error)
	// Read returns a pod's allocation, or an error matching ErrNotFound.
	Read(uid types.UID) ([]byte, error)
	Write(uid types.UID, data []byte) error
	// Remove deletes a pod's allocation; a missing one is no error.
	Remove(uid types.UID) error
}

// Range is the host IDs the agent allocates from.
type Range struct {
	First, Length uint32
}

// Manager allocates pods' slots.
type Manager struct {
	store     Store
	perPod    uint32
	off       uint32 // index of the range's first slot (First / perPod)
	used      []bool // slot index - off
	usedBy    map[types.UID]uint32
	randIntN  func(n int) int
	mu        sync.Mutex
	freeSlots int
}

// Options configure New.
type Options struct {
	Range Range
	// IDsPerPod is the size of a pod's slot; 0 means IDsPerPod.
	IDsPerPod uint32
	// MaxPods is the node's pod capacity: the range must hold that many
	// slots.
	MaxPods int
	// RandIntN picks the first slot to try among n (default math/rand);
	// tests pass a fixed one.
	RandIntN func(n int) int
}

// New checks the range as kubelet does and records every allocation the
// store holds. A malformed or conflicting allocation is an error, as it
// stops kubelet: two running pods must never share IDs.
func New(store Store, o Options) (*Manager, error) {
	per := o.IDsPerPod
	if per == 0 {
		per = IDsPerPod
	}
	first, length := o.Range.First, o.Range.Length
	if per%IDsPerPod != 0 {
		return nil, fmt.Errorf("kubelet user namespace length %v is not a multiple of %d", per, IDsPerPod)
	}
	if first%per != 0 {
		return nil, fmt.Errorf("kubelet user assigned ID %v is not a multiple of %v", first, per)
	}
	if first < per {
		// Mapping host ID 0 would give containers the host's root.
		return nil, fmt.Errorf("kubelet user assigned ID %v must be greater or equal to %v", first, per)
	}
	if length%per != 0 {
		return nil, fmt.Errorf("kubelet user assigned IDs length %v is not a multiple of %v", length, per)
	}
	if int64(length/per) < int64(o.MaxPods) {
		return nil, fmt.Errorf("kubelet user assigned IDs are not enough to support %v pods", o.MaxPods)
	}
	n := int(length / per)
	m := &Manager{
		store: store, perPod: per, off: first / per,
		used: make([]bool, n), usedBy: map[types.UID]uint32{},
		randIntN: o.RandIntN, freeSlots: n,
	}
	if m.randIntN == nil {
		m.randIntN = rand.IntN
	}
	uids, err := store.List()
	if err != nil {
		return nil, fmt.Errorf("read pods from disk: %w", err)
	}
	for _, uid := range uids {
		data, err := store.Read(uid)
		if errors.Is(err, ErrNotFound) || (err == nil && len(data) == 0) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("record pod mappings: %w", err)
		}
		if _, err := m.parseAndRecord(uid, data); err != nil {
			return nil, fmt.Errorf("record pod mappings: %w", err)
		}
	}
	return m, nil
}

// GetOrCreate returns pod uid's mappings: those recorded for it, or a new
// free slot, written to the store before it is returned.
func (m *Manager) GetOrCreate(uid types.UID) (Mappings, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, err := m.store.Read(uid)
	switch {
	case err == nil && len(data) > 0:
		ms, err := m.parseAndRecord(uid, data)
		if err != nil {
			return Mappings{}, fmt.Errorf("user namespace: %w", err)
		}
		return ms, nil
	case err == nil, errors.Is(err, ErrNotFound):
	default:
		return Mappings{}, err
	}
	ms, err := m.create(uid)
	if err != nil {
		return Mappings{}, fmt.Errorf("create user namespace: %w", err)
	}
	return ms, nil
}

// Allocated reports pod uid's first host ID, if it has a slot.
func (m *Manager) Allocated(uid types.UID) (uint32, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.usedBy[uid]
	return v, ok
}

// Release frees pod uid's slot and removes its file. A pod without one is
// a no-op.
func (m *Manager) Release(uid types.UID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.releaseLocked(uid)
}

// ReleaseOrphans frees the slots of pods that are neither known (a pod a
// source has or whose containers still exist) nor have a directory any
// more, as kubelet's cleanup of orphaned allocations.
func (m *Manager) ReleaseOrphans(known func(types.UID) bool) error {
	onDisk, err := m.store.List()
	if err != nil {
		return fmt.Errorf("user namespace: read pods from disk: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	found := map[types.UID]bool{}
	var errs []error
	for _, uid := range onDisk {
		found[uid] = true
		if !known(uid) {
			errs = append(errs, m.releaseLocked(uid))
		}
	}
	for uid := range m.usedBy {
		if !found[uid] {
			errs = append(errs, m.releaseLocked(uid))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) releaseLocked(uid types.UID) error {
	first, ok := m.usedBy[uid]
	err := m.store.Remove(uid)
	if !ok {
		return err
	}
	delete(m.usedBy, uid)
	m.used[first/m.perPod-m.off] = false
	m.freeSlots++
	return err
}

func (m *Manager) create(uid types.UID) (Mappings, error) {
	if m.freeSlots == 0 {
		return Mappings{}, errors.New("could not find an empty slot to allocate a user namespace")
	}
	n := len(m.used)
	start := m.randIntN(n)
	idx := -1
	for i := range n {
		if j := (start + i) % n; !m.used[j] {
			idx = j
			break
		}
	}
	first := (uint32(idx) + m.off) * m.perPod
	ms := Mappings{
		UIDMappings: []IDMapping{{HostID: first, ContainerID: 0, Length: m.perPod}},
		GIDMappings: []IDMapping{{HostID: first, ContainerID: 0, Length: m.perPod}},
	}
	data, err := json.Marshal(ms)
	if err != nil {
		return Mappings{}, err
	}
	if err := m.store.Write(uid, data); err != nil {
		return Mappings{}, err
	}
	m.used[idx] = true
	m.usedBy[uid] = first
	m.freeSlots--
	return ms, nil
}

// parseAndRecord checks a pod's file as kubelet does (one mapping, the
// same for UIDs and GIDs, from container ID 0, a whole slot in the range)
// and records its slot.
func (m *Manager) parseAndRecord(uid types.UID, data []byte) (Mappings, error) {
	var ms Mappings
	if err := json.Unmarshal(data, &ms); err != nil {
		return Mappings{}, fmt.Errorf("invalid user namespace mappings file: %w", err)
	}
	if len(ms.UIDMappings) != 1 {
		return Mappings{}, errors.New("invalid user namespace configuration: no more than one mapping allowed.")
	}
	if len(ms.UIDMappings) != len(ms.GIDMappings) {
		return Mappings{}, errors.New("invalid user namespace configuration: GID and UID mappings should be identical.")
	}
	if ms.UIDMappings[0] != ms.GIDMappings[0] {
		return Mappings{}, errors.New("invalid user namespace configuration: GID and UID mapping should be identical")
	}
	if ms.UIDMappings[0].ContainerID != 0 {
		return Mappings{}, errors.New("invalid user namespace configuration: UID 0 must be mapped")
	}
	from, length := ms.UIDMappings[0].HostID, ms.UIDMappings[0].Length
	if length != m.perPod {
		return Mappings{}, fmt.Errorf("wrong user namespace length %v", length)
	}
	if from%m.perPod != 0 {
		return Mappings{}, fmt.Errorf("wrong user namespace offset specified %v", from)
	}
	prev, found := m.usedBy[uid]
	if found {
		if prev != from {
			return Mappings{}, fmt.Errorf("different user namespace range already used by pod %q", uid)
		}
		return ms, nil
	}
	idx := int64(from/m.perPod) - int64(m.off)
	if idx < 0 || idx >= int64(len(m.used)) {
		return Mappings{}, fmt.Errorf("id %v is out of range", from)
	}
	if m.used[idx] {
		return Mappings{}, fmt.Errorf("range picked for pod %q already taken", uid)
	}
	m.used[idx] = true
	m.usedBy[uid] = from
	m.freeSlots--
	return ms, nil
}
