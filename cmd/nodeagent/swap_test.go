package main

import (
	"errors"
	"testing"

	"github.com/nodeagent/nodeagent/cm"
)

// kubelet's failSwapOn: swap on stops the start with kubelet's error unless
// failSwapOn is false; swap off starts either way; an unreadable
// /proc/swaps is an error, not a guess.
func TestCheckSwap(t *testing.T) {
	on := func() (bool, error) { return true, nil }
	off := func() (bool, error) { return false, nil }
	broken := func() (bool, error) { return false, errors.New("read /proc/swaps: permission denied") }
	if err := checkSwap(true, on); !errors.Is(err, cm.ErrSwapOn) || err.Error() != "running with swap on is not supported, please disable swap or set --fail-swap-on flag to false" {
		t.Errorf("swap on, failSwapOn: %v", err)
	}
	for _, fail := range []bool{true, false} {
		if err := checkSwap(fail, off); err != nil {
			t.Errorf("swap off, failSwapOn %v: %v", fail, err)
		}
	}
	if err := checkSwap(false, on); err != nil {
		t.Errorf("swap on, failSwapOn false: %v", err)
	}
	if err := checkSwap(true, broken); err == nil {
		t.Error("unreadable /proc/swaps: no error")
	}
}
