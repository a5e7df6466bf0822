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

// The file has kubelet v1.34's JSON layout
// (pkg/kubelet/cm/devicemanager/checkpoint).
func TestFileLayout(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, nil, map[string][]string{"example.com/resource": {"Dev-1", "Dev-2"}}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, FileName))
	const want = `{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{"example.com/resource":["Dev-1","Dev-2"]}},"Checksum":`
	if string(b[:len(want)]) != want {
		t.Errorf("file = %s, want prefix %s", b, want)
	}
}
