package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRoundTripAndCorruption(t *testing.T) {
	dir := t.TempDir()
	entries := []PodDevicesEntry{{PodUID: "u1", ContainerName: "c", ResourceName: "example.com/r",
		DeviceIDs: DevicesPerNUMA{-1: {"Dev-1"}}, AllocResp: []byte{1, 2}}}
	reg := map[string][]string{"example.com/r": {"Dev-1", "Dev-2"}}
	if err := Write(dir, entries, reg); err != nil {
		t.Fatal(err)
	}
	gotE, gotR, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(entries, gotE); d != "" {
		t.Errorf("entries (-want +got):\n%s", d)
	}
	if d := cmp.Diff(reg, gotR); d != "" {
		t.Errorf("registered (-want +got):\n%s", d)
	}
	p := filepath.Join(dir, FileName)
	b, _ := os.ReadFile(p)
	b = []byte(string(b[:len(b)-2]) + "7}") // change the checksum's last digit
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Read(dir); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Read of a changed file = %v, want ErrCorrupt", err)
	}
}

// The file is byte for byte what kubelet v1.34 writes for the same data
// (pkg/kubelet/cm/devicemanager/checkpoint's MarshalCheckpoint, run once
// from hack/controlplane's module to get this golden file), checksum
// included: kubelet can read the agent's checkpoint and the other way.
const kubeletGolden = `{"Data":{"PodDeviceEntries":[{"PodUID":"u1","ContainerName":"c","ResourceName":"example.com/resource","DeviceIDs":{"-1":["Dev-1"]},"AllocResp":"CgIIAQ=="}],"RegisteredDevices":{"example.com/resource":["Dev-1","Dev-2"]}},"Checksum":393271161}`

func TestKubeletFormat(t *testing.T) {
	dir := t.TempDir()
	entries := []PodDevicesEntry{{PodUID: "u1", ContainerName: "c", ResourceName: "example.com/resource",
		DeviceIDs: DevicesPerNUMA{-1: {"Dev-1"}}, AllocResp: []byte{10, 2, 8, 1}}}
	reg := map[string][]string{"example.com/resource": {"Dev-1", "Dev-2"}}
	if err := Write(dir, entries, reg); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != kubeletGolden {
		t.Errorf("file:\n%s\nkubelet writes:\n%s", b, kubeletGolden)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(kubeletGolden), 0o600); err != nil {
		t.Fatal(err)
	}
	gotE, gotR, err := Read(dir)
	if err != nil || !cmp.Equal(gotE, entries) || !cmp.Equal(gotR, reg) {
		t.Errorf("Read of kubelet's file = %v, %v, %v", gotE, gotR, err)
	}
}
