package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/runtime"
)

// An image that is present is never reported absent because the lookup
// ran out of time: GetImage under deadlines that end anywhere in it
// answers the image or an error that is not ErrNotFound. A pod worker
// pulls an image it is told is absent (pull policy IfNotPresent), and an
// offline node cannot: on the cgroup v2 guest under emulation, a liveness
// probe's restart of agnhost failed on "pull registry.k8s.io/...: i/o
// timeout" for minutes (issue 27's run 4, docs/vm.md).
func TestGetImageOutOfTimeIsNotAbsent(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real containerd")
	}
	rt, _ := newRuntime(t)
	ctx := context.Background()
	full := time.Now()
	if _, err := rt.GetImage(ctx, testimage.Ref); err != nil {
		t.Fatal(err)
	}
	took := time.Since(full)
	answered, failed := 0, 0
	// Deadlines from nothing to twice a whole lookup, in 200 steps.
	for i := range 200 {
		d := took * time.Duration(i) / 100
		dctx, cancel := context.WithTimeout(ctx, d)
		_, err := rt.GetImage(dctx, testimage.Ref)
		cancel()
		switch {
		case err == nil:
			answered++
		case errors.Is(err, runtime.ErrNotFound):
			t.Fatalf("GetImage with %s of a lookup that takes %s: %v; want the image or an error other than ErrNotFound", d, took, err)
		default:
			failed++
		}
	}
	t.Logf("a lookup takes %s; 200 deadlines up to twice that: %d answered, %d ran out of time", took, answered, failed)
}
