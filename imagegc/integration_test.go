package imagegc_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/imagegc"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/internal/testing/testlog"
	"github.com/nodeagent/nodeagent/runtime"
)

type recorder struct{ evs []string }

func (r *recorder) Event(_ k8sruntime.Object, _, reason, msg string) {
	r.evs = append(r.evs, reason+": "+msg)
}

// filler is a one-file image of 1 MiB of random bytes.
func filler(t *testing.T, ref string) []byte {
	t.Helper()
	data := make([]byte, 1<<20)
	_, _ = rand.Read(data)
	a, err := testimage.Spec{Ref: ref, Files: []testimage.File{testimage.Reg("data", 0o644, data)}, Cmd: []string{"/data"}}.Archive()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func names(t *testing.T, rt *runtime.Runtime) []string {
	t.Helper()
	imgs, err := rt.ListImages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, im := range imgs {
		out = append(out, im.Names...)
	}
	sort.Strings(out)
	return out
}

// Against a real containerd (private daemon, the agent's namespace and
// another one) with thresholds that are always exceeded: unused images
// older than the minimum age go, least recently used first; the image a
// container uses, a pinned image and everything in the other namespace
// stay; the space cannot be freed, so FreeDiskSpaceFailed is reported.
func TestCollectorAgainstContainerd(t *testing.T) {
	cd := testimage.StartContainerd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	open := func(ns string) *runtime.Runtime {
		rt, err := runtime.New(runtime.Options{Address: cd.Address, Namespace: ns, CgroupParent: cd.CgroupParent, CallTimeout: 20 * time.Second, Logger: testlog.New(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Close() })
		return rt
	}
	rt, other := open("agent"), open("other")
	if err := testimage.Import(ctx, rt); err != nil {
		t.Fatal(err)
	}
	shared := filler(t, "example.com/shared:1")
	for _, im := range []struct {
		rt      *runtime.Runtime
		archive []byte
	}{
		{rt, filler(t, "example.com/old:1")},
		{rt, filler(t, "example.com/older:1")},
		{rt, filler(t, "example.com/pinned:1")},
		{rt, shared},
		{other, shared},
		{other, filler(t, "example.com/elsewhere:1")},
	} {
		if _, err := im.rt.ImportImage(ctx, strings.NewReader(string(im.archive))); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.PinImage(ctx, "example.com/pinned:1"); err != nil {
		t.Fatal(err)
	}
	// A created (not running) container still uses its image.
	id, err := rt.CreateContainer(ctx, runtime.ContainerSpec{
		Pod:  runtime.PodRef{UID: types.UID("uid-gc"), Name: "gc", Namespace: "default"},
		Name: "c", Image: "nodeagent/busybox:test", Command: []string{"true"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rt.RemoveContainer(context.Background(), id) }()

	root, err := rt.ImageFSRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(root, cd.Dir) {
		t.Fatalf("image filesystem root %s is not in the private containerd's %s", root, cd.Dir)
	}
	t.Logf("image filesystem: %s", root)

	clk := testingclock.NewFakeClock(time.Now())
	rec := &recorder{}
	c := imagegc.New(imagegc.Options{
		Policy:  imagegc.Policy{HighThresholdPercent: 1, LowThresholdPercent: 0, MinAge: 2 * time.Minute},
		Runtime: rt,
		Usage: func(context.Context) (imagegc.Usage, error) {
			u, err := runtime.StatFS(root)
			return imagegc.Usage{Capacity: u.Capacity, Available: u.Available}, err
		},
		Recorder: rec, Node: &v1.Node{}, Clock: clk, Logger: testlog.New(t),
	})
	before := names(t, rt)
	if err := c.RunOnce(ctx); err == nil {
		t.Fatal("a filesystem above 1% was freed")
	}
	if got := names(t, rt); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("images younger than the minimum age removed: %v → %v", before, got)
	}
	clk.Step(3 * time.Minute)
	err = c.RunOnce(ctx)
	if err == nil || !strings.Contains(err.Error(), "Failed to garbage collect required amount of images") {
		t.Fatalf("second run: %v", err)
	}
	want := []string{testimage.Ref, "example.com/pinned:1"}
	if got := names(t, rt); fmt.Sprint(got) != fmt.Sprint(sortedCopy(want)) {
		t.Fatalf("images left %v, want %v", got, sortedCopy(want))
	}
	if got, want := names(t, other), []string{"example.com/elsewhere:1", "example.com/shared:1"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the other namespace's images %v, want %v", got, want)
	}
	// The other namespace's copy of the shared image is intact: a
	// container can be made from it.
	if _, err := other.GetImage(ctx, "example.com/shared:1"); err != nil {
		t.Fatalf("shared image in the other namespace: %v", err)
	}
	// Two failures in a row: the second is also ImageGCFailed.
	if len(rec.evs) != 3 || !strings.HasPrefix(rec.evs[1], "FreeDiskSpaceFailed: Failed to garbage collect required amount of images. Attempted to free ") ||
		!strings.HasPrefix(rec.evs[2], "ImageGCFailed: ") {
		t.Fatalf("events %v", rec.evs)
	}
	if _, err := rt.InspectContainer(ctx, id); err != nil {
		t.Fatalf("the container: %v", err)
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
