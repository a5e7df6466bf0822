package main

import (
	"strings"
	"testing"
)

// An agent whose containers cannot get kubelet's -997 says so, naming the
// capability; one that can says nothing.
func TestOOMFloorWarning(t *testing.T) {
	for _, floor := range []int{-1000, -999, -997} {
		if msg, _ := oomFloorWarning(floor); msg != "" {
			t.Errorf("floor %d: warned %q", floor, msg)
		}
	}
	for _, floor := range []int{-996, 0} {
		if msg, _ := oomFloorWarning(floor); !strings.Contains(msg, "CAP_SYS_RESOURCE") {
			t.Errorf("floor %d: warning %q does not name CAP_SYS_RESOURCE", floor, msg)
		}
	}
}
