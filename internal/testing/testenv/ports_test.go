package testenv

import (
	"fmt"
	"net"
	"testing"
)

// FreePort's ports are below the ephemeral range, distinct from one call
// to the next, and bindable; a port in use is passed over.
func TestFreePort(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		p := FreePort(t)
		if p < portFirst || p >= portFirst+portCount || p >= 30000 {
			t.Fatalf("port %d outside %d-%d", p, portFirst, portFirst+portCount-1)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	// The next port in the sequence, taken: FreePort skips it.
	next := portFirst + int((portSeq.Load()+1)%portCount)
	if l, err := net.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", next)); err == nil {
		defer l.Close()
	} // else someone else holds it: in use all the same
	if p := FreePort(t); p == next {
		t.Errorf("FreePort returned %d, which is in use", p)
	}
}
