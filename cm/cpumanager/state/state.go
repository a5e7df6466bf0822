// Package state is kubelet's CPU manager checkpoint,
// <rootDir>/cpu_manager_state: the policy that wrote it, the shared pool
// (defaultCpuSet) and the exclusive CPUs of each container (entries, by
// pod UID then container name), as cpuset strings ("0-3,8"). The JSON
// layout and the checksum (FNV-32a of the data's deep dump with the
// checksum at 0, as kubelet's checkpointmanager computes it) are kubelet's
// v2 format; the dump names the types, so the package and type names here
// are kubelet's too. Kubelet's older v1 format (entries by container ID)
// is not read: a node that still has one was last run by a kubelet older
// than 1.12.
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/dump"
	"k8s.io/utils/cpuset"

	"github.com/nodeagent/nodeagent/internal/atomicfile"
)

// FileName is kubelet's checkpoint file name under the root directory.
const FileName = "cpu_manager_state"

// ErrCorrupt: the checkpoint's checksum does not match its data.
var ErrCorrupt = errors.New("checkpoint is corrupted")

// Checksum is kubelet's checkpointmanager checksum type (its name is part
// of the dump the checksum is computed from).
type Checksum uint64

// CPUManagerCheckpoint is the file's content.
type CPUManagerCheckpoint struct {
	PolicyName    string                       `json:"policyName"`
	DefaultCPUSet string                       `json:"defaultCpuSet"`
	Entries       map[string]map[string]string `json:"entries,omitempty"`
	Checksum      Checksum                     `json:"checksum"`
}

// Assignments are the exclusive CPUs of containers by pod UID and
// container name.
type Assignments map[string]map[string]cpuset.CPUSet

// Clone is a deep copy.
func (a Assignments) Clone() Assignments {
	out := make(Assignments, len(a))
	for pod, cs := range a {
		out[pod] = make(map[string]cpuset.CPUSet, len(cs))
		for name, set := range cs {
			out[pod][name] = set
		}
	}
	return out
}

// State is what the checkpoint holds, parsed.
type State struct {
	Policy  string
	Default cpuset.CPUSet
	Assign  Assignments
}

// checksum is kubelet's: its dump names our package "state" as kubelet's
// does; the checksum field's type is kubelet's checksum.Checksum.
func (cp *CPUManagerCheckpoint) checksum() Checksum {
	saved := cp.Checksum
	cp.Checksum = 0
	d := dump.ForHash(cp)
	cp.Checksum = saved
	d = strings.Replace(d, "Checksum:(state.Checksum)", "Checksum:(checksum.Checksum)", 1)
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", d)
	return Checksum(h.Sum32())
}

// Marshal is the file's content for s.
func Marshal(s State) ([]byte, error) {
	cp := &CPUManagerCheckpoint{
		PolicyName:    s.Policy,
		DefaultCPUSet: s.Default.String(),
		Entries:       map[string]map[string]string{},
	}
	for pod, cs := range s.Assign {
		cp.Entries[pod] = make(map[string]string, len(cs))
		for name, set := range cs {
			cp.Entries[pod][name] = set.String()
		}
	}
	cp.Checksum = cp.checksum()
	return json.Marshal(cp)
}

// Unmarshal parses a file's content, checking its checksum (0, as
// kubelet's older file backend wrote it, is accepted) and its cpusets.
func Unmarshal(b []byte) (State, error) {
	// Entries starts empty, not nil, as kubelet's: the dump, and so the
	// checksum, tell them apart.
	cp := &CPUManagerCheckpoint{Entries: map[string]map[string]string{}}
	if err := json.Unmarshal(b, cp); err != nil {
		return State{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if cp.Checksum != 0 {
		if got := cp.checksum(); got != cp.Checksum {
			return State{}, fmt.Errorf("%w: checksum %d, file says %d", ErrCorrupt, got, cp.Checksum)
		}
	}
	s := State{Policy: cp.PolicyName, Assign: Assignments{}}
	var err error
	if s.Default, err = cpuset.Parse(cp.DefaultCPUSet); err != nil {
		return State{}, fmt.Errorf("could not parse default cpu set %q: %v", cp.DefaultCPUSet, err)
	}
	for pod, cs := range cp.Entries {
		s.Assign[pod] = make(map[string]cpuset.CPUSet, len(cs))
		for name, str := range cs {
			set, err := cpuset.Parse(str)
			if err != nil {
				return State{}, fmt.Errorf("could not parse cpuset %q for container %q in pod %q: %v", str, name, pod, err)
			}
			s.Assign[pod][name] = set
		}
	}
	return s, nil
}

// Write replaces dir's checkpoint atomically.
func Write(dir string, s State) error {
	b, err := Marshal(s)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, FileName), b)
}

// Read reads dir's checkpoint; a missing file is os.ErrNotExist.
func Read(dir string) (State, error) {
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		return State{}, err
	}
	return Unmarshal(b)
}
