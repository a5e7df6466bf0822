package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"
)

// Ports handed out by FreePort: below the kernel's ephemeral range
// (ip_local_port_range, 32768-60999 by default) and the NodePort range
// (30000-32767). A port the kernel picks for ":0" is in the ephemeral
// range, and any outgoing connection on the machine may take it as its
// source port before the agent binds it: CI saw an agent's node API fail
// with "address already in use" that way. The sequence starts at a random
// place so that parallel test binaries differ.
const (
	portFirst = 20000
	portCount = 10000
)

var portSeq atomic.Uint32

func init() { portSeq.Store(uint32(rand.IntN(portCount))) }

// FreePort returns a TCP port nothing listens on (checked on the wildcard
// address, where the agent's node API listens), outside the ephemeral
// range.
func FreePort(t testing.TB) int {
	t.Helper()
	for range 500 {
		p := portFirst + int(portSeq.Add(1)%portCount)
		l, err := net.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", p))
		if err != nil {
			continue
		}
		l.Close()
		return p
	}
	t.Fatalf("no free port in %d-%d after 500 tries", portFirst, portFirst+portCount-1)
	return 0
}
