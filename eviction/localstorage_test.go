package eviction

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	utilptr "k8s.io/utils/ptr"

	sig "github.com/nodeagent/nodeagent/internal/evictionapi"
	"github.com/nodeagent/nodeagent/runtime"
)

func sized(name, limit string, medium v1.StorageMedium) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{
		Medium: medium, SizeLimit: utilptr.To(resource.MustParse(limit)),
	}}}
}

// kubelet's localStorageEviction: its order (emptyDir, pod total,
// container) and its exact messages.
func TestLocalStorageViolation(t *testing.T) {
	withLimits := func(limits ...string) *v1.Pod {
		p := pod("p", 0, nil, nil)
		p.Spec.Containers = nil
		for i, l := range limits {
			c := v1.Container{Name: string(rune('a' + i))}
			if l != "" {
				c.Resources.Limits = disk(l)
			}
			p.Spec.Containers = append(p.Spec.Containers, c)
		}
		return p
	}
	emptyDir := withLimits("")
	emptyDir.Spec.Volumes = []v1.Volume{sized("mem", "1Mi", v1.StorageMediumMemory), sized("data", "10Mi", "")}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		u    LocalUsage
		want string
	}{
		{"emptyDir under its limit", emptyDir, LocalUsage{EmptyDirs: map[string]int64{"data": 10 * mi}, Pod: 50 * mi}, ""},
		{"emptyDir over its limit", emptyDir, LocalUsage{EmptyDirs: map[string]int64{"data": 10*mi + 1}},
			`Usage of EmptyDir volume "data" exceeds the limit "10Mi". `},
		{"memory emptyDir: its tmpfs size is the limit", emptyDir, LocalUsage{EmptyDirs: map[string]int64{"mem": 5 * mi}}, ""},
		{"pod over the sum of its containers' limits", withLimits("10Mi", "20Mi"),
			LocalUsage{Pod: 31 * mi, Containers: map[string]int64{"a": 5 * mi, "b": 5 * mi}},
			"Pod ephemeral local storage usage exceeds the total limit of containers 30Mi. "},
		{"container over its limit", withLimits("10Mi", "20Mi"),
			LocalUsage{Pod: 25 * mi, Containers: map[string]int64{"a": 11 * mi, "b": 1 * mi}},
			`Container a exceeded its local ephemeral storage limit "10Mi". `},
		{"a container without a limit is not checked", withLimits("", "20Mi"),
			LocalUsage{Pod: 21 * mi, Containers: map[string]int64{"a": 100 * mi, "b": 1 * mi}},
			"Pod ephemeral local storage usage exceeds the total limit of containers 20Mi. "},
		{"no limits", withLimits(""), LocalUsage{Pod: 1 << 40, Containers: map[string]int64{"a": 1 << 40}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := localStorageViolation(tc.pod, tc.u); got != tc.want {
				t.Errorf("message %q, want %q", got, tc.want)
			}
		})
	}
	if hasLocalStorageLimit(withLimits("")) || !hasLocalStorageLimit(withLimits("", "1Gi")) || !hasLocalStorageLimit(emptyDir) {
		t.Errorf("hasLocalStorageLimit: only pods with an ephemeral-storage limit or a disk emptyDir sizeLimit are measured")
	}
}

// Every pass evicts the pods over a local storage limit, with 1s, the
// local-storage evict function and no pressure needed; only pods with
// limits are measured; critical pods stay; then no threshold eviction
// that pass.
func TestSynchronizeLocalStorage(t *testing.T) {
	ctx := context.Background()
	over := pod("over", 0, nil, nil)
	over.Spec.Volumes = []v1.Volume{sized("data", "10Mi", "")}
	static := pod("static", 0, nil, nil)
	static.Spec.Volumes = []v1.Volume{sized("data", "10Mi", "")}
	static.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	plain := pod("plain", 0, nil, nil)
	f := newFixture(t, []*v1.Pod{plain, static, over}, map[string]PodUsage{"plain": {Memory: 900 * mi}},
		observation(sig.SignalMemoryAvailable, 50*mi, 100*mi)) // memory pressure too
	var measured []string
	var local []string
	f.m.o.LocalUsage = func(_ context.Context, pods []*v1.Pod) map[string]LocalUsage {
		out := map[string]LocalUsage{}
		for _, p := range pods {
			measured = append(measured, p.Name)
			out[string(p.UID)] = LocalUsage{EmptyDirs: map[string]int64{"data": 11 * mi}}
		}
		return out
	}
	f.m.o.EvictLocalStorage = func(_ context.Context, p *v1.Pod, grace time.Duration, msg string) error {
		local = append(local, p.Name+" "+grace.String()+" "+msg)
		return nil
	}
	p, err := f.m.Synchronize(ctx)
	if err != nil || p == nil || p.Name != "over" {
		t.Fatalf("Synchronize = %v, %v; want over evicted", p, err)
	}
	if want := []string{`over 1s Usage of EmptyDir volume "data" exceeds the limit "10Mi". `}; !slices.Equal(local, want) {
		t.Errorf("local storage evictions %q, want %q", local, want)
	}
	if !slices.Equal(measured, []string{"static", "over"}) {
		t.Errorf("measured %v, want only the pods with limits", measured)
	}
	if len(f.evicted) != 0 {
		t.Errorf("threshold evictions %v in a pass that evicted for local storage", f.evicted)
	}
	if !slices.Contains(f.rec.events, event{"over", v1.EventTypeWarning, "Evicted", `Usage of EmptyDir volume "data" exceeds the limit "10Mi". `}) {
		t.Errorf("events %v lack the pod's Evicted", f.rec.events)
	}
}

// LocalUsage measures a sized emptyDir's directory, the pod's directory
// and logs, and the writable layer (into the container's usage unless the
// image filesystem is dedicated).
func TestStatsLocalUsage(t *testing.T) {
	root := t.TempDir()
	p := pod("p", 0, nil, nil)
	p.UID = types.UID("uid-1")
	p.Spec.Volumes = []v1.Volume{sized("data", "10Mi", ""), {Name: "plain", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	write := func(path string, n int) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	podDir := filepath.Join(root, "pods", "uid-1")
	write(filepath.Join(podDir, "volumes", "empty-dir", "data", "f"), 1<<20)
	write(filepath.Join(podDir, "volumes", "empty-dir", "plain", "f"), 2<<20)
	write(filepath.Join(root, "logs", "default_p_uid-1", "c", "0.log"), 64<<10)
	for _, dedicated := range []bool{false, true} {
		s := Stats{
			RootDir: root,
			Containers: func(context.Context) ([]runtime.Container, error) {
				return []runtime.Container{{ID: "c1", Name: "c", State: runtime.StateRunning, Pod: runtime.PodRef{UID: "uid-1"}}}, nil
			},
			WritableLayer:    func(_ context.Context, id string) (int64, error) { return 5 << 20, nil },
			DedicatedImageFS: dedicated,
		}
		u := s.LocalUsage(context.Background(), []*v1.Pod{p})["uid-1"]
		if got := u.EmptyDirs["data"]; got < 1<<20 || got > 1<<20+64<<10 {
			t.Errorf("emptyDir data %d, want about 1Mi", got)
		}
		if _, ok := u.EmptyDirs["plain"]; ok {
			t.Errorf("an emptyDir without sizeLimit was measured on its own")
		}
		if u.Pod < 8<<20 || u.Pod > 9<<20 {
			t.Errorf("pod total %d, want about 8Mi (volumes, log, writable layer)", u.Pod)
		}
		wantC := int64(64<<10 + 5<<20)
		if dedicated {
			wantC = 64 << 10
		}
		if got := u.Containers["c"]; got < wantC || got > wantC+8<<10 {
			t.Errorf("dedicated imagefs %v: container usage %d, want about %d", dedicated, got, wantC)
		}
	}
}
