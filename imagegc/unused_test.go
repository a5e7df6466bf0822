package imagegc

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/runtime"
)

// Under disk pressure every unused image old enough goes, whatever the
// thresholds (here: collection disabled); used, pinned and young ones stay.
func TestDeleteUnusedImages(t *testing.T) {
	c, fs, clk, _ := newCollector(t, Policy{HighThresholdPercent: 100, LowThresholdPercent: 80, MinAge: 2 * time.Minute})
	ctx := context.Background()
	fs.add("sha256:a", "docker.io/library/a:1", 40)
	fs.add("sha256:b", "docker.io/library/b:1", 50)
	fs.add("sha256:used", "docker.io/library/used:1", 40)
	fs.images["sha256:pinned"] = runtime.Image{ID: "sha256:pinned", Names: []string{"registry.k8s.io/pause:3.10"}, Size: 40, Pinned: true}
	fs.ctrs = []runtime.Container{{ID: "1", Image: "docker.io/library/used:1"}}
	if freed, err := c.DeleteUnusedImages(ctx); err != nil || freed != 0 {
		t.Fatalf("first call: freed %d, %v; want nothing (images just detected)", freed, err)
	}
	clk.Step(3 * time.Minute)
	fs.add("sha256:young", "docker.io/library/young:1", 10)
	freed, err := c.DeleteUnusedImages(ctx)
	if err != nil || freed != 90 {
		t.Fatalf("freed %d, %v; want 90", freed, err)
	}
	got := slices.Clone(fs.removed)
	slices.Sort(got)
	if !slices.Equal(got, []string{"sha256:a", "sha256:b"}) {
		t.Errorf("removed %v, want a and b", got)
	}
}

// An image mounted as a pod's image volume is in use though no container
// runs it, as kubelet counts image volumes; once unmounted it may go.
func TestImageVolumeKeepsImage(t *testing.T) {
	c, fs, clk, _ := newCollector(t, Policy{HighThresholdPercent: 100, LowThresholdPercent: 80, MinAge: time.Minute})
	ctx := context.Background()
	fs.add("sha256:vol", "docker.io/library/data:1", 40)
	fs.vols = []runtime.ImageVolume{{Key: "k", ImageID: "sha256:vol", PodUID: "u"}}
	if _, err := c.DeleteUnusedImages(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Step(2 * time.Minute)
	if freed, err := c.DeleteUnusedImages(ctx); err != nil || freed != 0 || len(fs.removed) > 0 {
		t.Fatalf("freed %d (%v), removed %v; want the mounted image kept", freed, err, fs.removed)
	}
	fs.vols = nil
	clk.Step(2 * time.Minute)
	if freed, err := c.DeleteUnusedImages(ctx); err != nil || freed != 40 {
		t.Fatalf("freed %d, %v after unmount; want 40", freed, err)
	}
}
