package evictionapi

import (
	"maps"
	"slices"
	"testing"
)

// TestDefaultHardIsKubelets pins the defaults to kubelet 1.34's
// pkg/kubelet/eviction/defaults_linux.go (DefaultEvictionHard); the
// KubeletConfiguration v1beta1 field comment omits imagefs.inodesFree, the
// code has it.
func TestDefaultHardIsKubelets(t *testing.T) {
	want := map[string]string{
		"memory.available":   "100Mi",
		"nodefs.available":   "10%",
		"nodefs.inodesFree":  "5%",
		"imagefs.available":  "15%",
		"imagefs.inodesFree": "5%",
	}
	if got := DefaultHard(); !maps.Equal(got, want) {
		t.Errorf("DefaultHard() = %v, want %v", got, want)
	}
	for sig := range DefaultHard() {
		if !slices.Contains(Signals(), sig) {
			t.Errorf("default signal %q is not in Signals()", sig)
		}
	}
}

func TestResultsAreCopies(t *testing.T) {
	DefaultHard()[SignalMemoryAvailable] = "1Gi"
	if got := DefaultHard()[SignalMemoryAvailable]; got != "100Mi" {
		t.Errorf("DefaultHard shares its map: memory.available = %q after a caller's write", got)
	}
	Signals()[0] = "x"
	if got := Signals()[0]; got != SignalMemoryAvailable {
		t.Errorf("Signals shares its slice: [0] = %q after a caller's write", got)
	}
}
