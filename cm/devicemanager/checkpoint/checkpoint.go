// Package checkpoint is kubelet's device manager checkpoint,
// <rootDir>/device-plugins/kubelet_internal_checkpoint: which devices each
// container was given (with the plugin's Allocate response) and which
// devices each resource had. The JSON layout and the checksum (FNV-32a of
// the data's deep dump, as kubelet's checkpointmanager computes it) are
// kubelet's, so the type names here are kubelet's too: they are part of
// the checksum.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/util/dump"

	"github.com/nodeagent/nodeagent/internal/atomicfile"
)

// FileName is kubelet's checkpoint file name in the device-plugins directory.
const FileName = "kubelet_internal_checkpoint"

// ErrCorrupt: the checkpoint's checksum does not match its data.
var ErrCorrupt = errors.New("checkpoint is corrupted")

// DevicesPerNUMA are device IDs by NUMA node (-1: no topology).
type DevicesPerNUMA map[int64][]string

// PodDevicesEntry is one container's devices of one resource.
type PodDevicesEntry struct {
	PodUID        string
	ContainerName string
	ResourceName  string
	DeviceIDs     DevicesPerNUMA
	// AllocResp is the plugin's ContainerAllocateResponse, protobuf.
	AllocResp []byte
}

type checkpointData struct {
	PodDeviceEntries  []PodDevicesEntry
	RegisteredDevices map[string][]string
}

// Data is the file's content.
type Data struct {
	Data     checkpointData
	Checksum uint64
}

func checksum(d checkpointData) uint64 {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(d))
	return uint64(h.Sum32())
}

// Write replaces the checkpoint in dir atomically.
func Write(dir string, entries []PodDevicesEntry, registered map[string][]string) error {
	d := Data{Data: checkpointData{PodDeviceEntries: entries, RegisteredDevices: registered}}
	d.Checksum = checksum(d.Data)
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, FileName), b)
}

// Read reads the checkpoint in dir; a missing file is os.ErrNotExist, a
// checksum mismatch ErrCorrupt.
func Read(dir string) (entries []PodDevicesEntry, registered map[string][]string, err error) {
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		return nil, nil, err
	}
	var d Data
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if got := checksum(d.Data); got != d.Checksum {
		return nil, nil, fmt.Errorf("%w: checksum %d, file says %d", ErrCorrupt, got, d.Checksum)
	}
	return d.Data.PodDeviceEntries, d.Data.RegisteredDevices, nil
}
