package pods

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/runtime"
)

// timedRuntime is the real runtime, recording when each pull was in it.
type timedRuntime struct {
	*runtime.Runtime
	mu    sync.Mutex
	pulls []pullSpan
}

type pullSpan struct {
	ref        string
	start, end time.Time
}

func (r *timedRuntime) PullImageWithAuth(ctx context.Context, ref string, auth *runtime.RegistryAuth) (runtime.Image, error) {
	start := time.Now()
	img, err := r.Runtime.PullImageWithAuth(ctx, ref, auth)
	r.mu.Lock()
	r.pulls = append(r.pulls, pullSpan{ref, start, time.Now()})
	r.mu.Unlock()
	return img, err
}

var pulledRE = regexp.MustCompile(`^Pulled: Successfully pulled image "([^"]+)" in (\S+) \((\S+) including waiting\)`)

// Two pods' pulls through the node's puller into a real containerd, from
// a slow registry on loopback (each pull takes a second or more): with
// serializeImagePulls the second pull reaches containerd only once the
// first returned, and its Pulled event counts the wait; with it off
// (and no maxParallelImagePulls) both are in containerd at once.
func TestImagePullsRealContainerd(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real containerd")
	}
	reg, err := testimage.NewRegistryWith(testimage.RegistryOptions{BlobChunk: 64 << 10, BlobInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	for _, serialize := range []bool{true, false} {
		t.Run(fmt.Sprintf("serializeImagePulls=%v", serialize), func(t *testing.T) {
			log := slog.New(slog.NewTextHandler(testLogWriter{t}, nil))
			// A containerd of its own: nothing of the image in its
			// content store, so that every pull downloads.
			cd := testimage.StartContainerd(t)
			real, err := runtime.New(runtime.Options{Address: cd.Address, Namespace: "pulls", CgroupParent: cd.CgroupParent,
				CallTimeout: 20 * time.Second, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { real.Close() })
			rt := &timedRuntime{Runtime: real}
			rec := &pullRecorder{}
			d := &workerDeps{rt: rt, rec: rec, clock: clock.RealClock{},
				puller: newImagePuller(ImagePullLimits{Serialize: serialize, QPS: 5, Burst: 10}, clock.RealClock{})}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()

			images := []string{reg.Host + "/a/busybox:v1", reg.Host + "/b/busybox:v1"}
			var wg sync.WaitGroup
			errs := make([]error, len(images))
			for i, img := range images {
				c := v1.Container{Name: "app", Image: img, ImagePullPolicy: v1.PullIfNotPresent}
				pod := testPod(fmt.Sprintf("pull-%d", i), v1.RestartPolicyAlways, c)
				im := newPodImages(d, types.UID(fmt.Sprintf("uid-pull-%d", i)), kubetypes.SourceAPI, log)
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, _, errs[i] = im.ensure(ctx, pod, &pod.Spec.Containers[0])
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("pull of %s: %v", images[i], err)
				}
				if _, err := real.GetImage(ctx, images[i]); err != nil {
					t.Fatalf("%s not in containerd after its pull: %v", images[i], err)
				}
			}

			rt.mu.Lock()
			spans := append([]pullSpan(nil), rt.pulls...)
			rt.mu.Unlock()
			if len(spans) != 2 {
				t.Fatalf("%d pulls reached containerd, want 2", len(spans))
			}
			sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
			first, second := spans[0], spans[1]
			t.Logf("pulls in containerd: %s %v, %s %v after the first began",
				first.ref, first.end.Sub(first.start), second.ref, second.start.Sub(first.start))
			if d := first.end.Sub(first.start); d < 500*time.Millisecond {
				t.Fatalf("the first pull took %v only: the registry is not slow enough to tell", d)
			}
			if serialize && second.start.Before(first.end) {
				t.Errorf("serialized: the second pull began %v before the first ended", first.end.Sub(second.start))
			}
			if !serialize && !second.start.Before(first.end) {
				t.Errorf("parallel: the second pull began only after the first ended")
			}

			// kubelet's Pulled event: the pull's own time, then the time
			// including the wait for its turn.
			own, total := map[string]time.Duration{}, map[string]time.Duration{}
			evs := rec.take()
			for _, ev := range evs {
				if m := pulledRE.FindStringSubmatch(ev); m != nil {
					o, err1 := time.ParseDuration(m[2])
					tt, err2 := time.ParseDuration(m[3])
					if err1 != nil || err2 != nil {
						t.Fatalf("durations of %q: %v %v", ev, err1, err2)
					}
					own[m[1]], total[m[1]] = o, tt
				}
			}
			if len(own) != 2 {
				t.Fatalf("Pulled events for %d images, want 2:\n%s", len(own), strings.Join(evs, "\n"))
			}
			waited := total[second.ref] - own[second.ref]
			t.Logf("Pulled: %s in %v (%v including waiting); %s in %v (%v including waiting)",
				first.ref, own[first.ref], total[first.ref], second.ref, own[second.ref], total[second.ref])
			if serialize && waited < own[first.ref]-250*time.Millisecond {
				t.Errorf("serialized: the second pull waited %v, the first took %v", waited, own[first.ref])
			}
			if !serialize && waited > time.Second {
				t.Errorf("parallel: the second pull waited %v", waited)
			}
		})
	}
}
