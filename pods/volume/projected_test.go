package volume

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/testing/backofftest"
	"github.com/nodeagent/nodeagent/internal/testing/faketoken"
	"github.com/nodeagent/nodeagent/internal/testing/testlog"
	"github.com/nodeagent/nodeagent/pods/internal/podtest"
	"github.com/nodeagent/nodeagent/pods/objcache"
)

var projT0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func tokenText(n int) string {
	// Different lengths, so that a torn read is visible.
	return fmt.Sprintf("token-%d.", n) + strings.Repeat(string(rune('a'+n%26)), 500+(n*37)%3000)
}

type projFixture struct {
	clk    *testingclock.FakeClock
	client *fake.Clientset
	tokens *faketoken.Server
	p      *Projector
	podDir string
}

func newProjFixture(t *testing.T, objs ...runtime.Object) *projFixture {
	t.Helper()
	needRootForVolumes(t)
	clk := testingclock.NewFakeClock(projT0)
	client := fake.NewClientset(objs...)
	ts := &faketoken.Server{Clock: clk, Text: tokenText}
	ts.Install(client)
	podDir := filepath.Join(t.TempDir(), "pod")
	t.Cleanup(func() {
		if err := TeardownVolumes(podDir); err != nil {
			t.Errorf("TeardownVolumes: %v", err)
		}
	})
	return &projFixture{clk: clk, client: client, tokens: ts, p: newFakeProjector(client, clk, testlog.New(t)), podDir: podDir}
}

func rootCA(data string) *v1.ConfigMap {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": data}}
}

// apiPod is a pod as the API server stores it after `kubectl run`: with
// kubeAPIAccess as spec.volumes[0].
func apiPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web"},
		Spec: v1.PodSpec{
			ServiceAccountName: "default",
			Volumes:            []v1.Volume{podtest.KubeAPIAccess()},
		},
	}
}

func readVolFile(t *testing.T, dir, name string) (string, fs.FileMode) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b), fi.Mode()
}

func dataDir(t *testing.T, dir string) string {
	t.Helper()
	target, err := os.Readlink(filepath.Join(dir, dataDirName))
	if err != nil {
		t.Fatal(err)
	}
	return target
}

func TestProjectorKubeAPIAccess(t *testing.T) {
	f := newProjFixture(t, rootCA("CA DATA"))
	pod := apiPod()
	vols, next, err := f.p.Setup(context.Background(), pod, f.podDir)
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	dir := filepath.Join(f.podDir, "volumes", "projected", "kube-api-access-x2b4k")
	if d := cmp.Diff(map[string]string{"kube-api-access-x2b4k": dir}, vols); d != "" {
		t.Errorf("volumes (-want +got):\n%s", d)
	}
	// 3607s token: refresh after 80% of it.
	if want := projT0.Add(3607 * time.Second * 8 / 10); !next.Equal(want) {
		t.Errorf("refresh at %v, want %v", next, want)
	}

	for name, want := range map[string]string{"token": tokenText(1), "ca.crt": "CA DATA", "namespace": "default"} {
		got, mode := readVolFile(t, dir, name)
		if got != want {
			t.Errorf("%s = %.40q, want %.40q", name, got, want)
		}
		if mode != 0o644 {
			t.Errorf("%s mode = %v, want 0644", name, mode)
		}
		// User-visible names are links into ..data.
		if target, err := os.Readlink(filepath.Join(dir, name)); err != nil || target != filepath.Join(dataDirName, name) {
			t.Errorf("%s -> %q (%v), want a link to ..data/%s", name, target, err, name)
		}
	}
	if !strings.HasPrefix(dataDir(t, dir), "..2026_11_22_10_00_00.") {
		t.Errorf("..data -> %q, want a timestamped directory", dataDir(t, dir))
	}

	// The request: the pod's service account, bound to the pod.
	if got := f.tokens.ServiceAccounts(); len(got) != 1 || got[0] != "default" {
		t.Fatalf("token requests for service accounts %q, want one for default", got)
	}
	wantSpec := authenticationv1.TokenRequestSpec{
		ExpirationSeconds: utilptr.To[int64](3607),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "uid-web"},
	}
	if d := cmp.Diff(wantSpec, f.tokens.Requests()[0].Spec); d != "" {
		t.Errorf("token request spec (-want +got):\n%s", d)
	}

	// A tmpfs, nosuid and nodev, of the minimum size.
	if n := mountCount(t, dir); n != 1 {
		t.Fatalf("%d mounts on %s, want 1", n, dir)
	}
	st := statfs(t, dir)
	if st.Type != unix.TMPFS_MAGIC {
		t.Errorf("filesystem type %#x, want tmpfs", st.Type)
	}
	if st.Flags&unix.ST_NOSUID == 0 || st.Flags&unix.ST_NODEV == 0 {
		t.Errorf("mount flags %#x, want nosuid and nodev", st.Flags)
	}
	if size := int64(st.Blocks) * st.Bsize; size != projectedMinSize {
		t.Errorf("tmpfs size %d, want %d", size, projectedMinSize)
	}

	// A second Setup before the refresh time: no request, no rewrite, one
	// mount.
	before := dataDir(t, dir)
	f.clk.Step(time.Minute)
	if _, next2, err := f.p.Setup(context.Background(), pod, f.podDir); err != nil || !next2.Equal(next) {
		t.Fatalf("second Setup = %v, %v; want the same refresh time %v", next2, err, next)
	}
	if n := f.tokens.Count(); n != 1 {
		t.Errorf("%d token requests after the second Setup, want 1", n)
	}
	if after := dataDir(t, dir); after != before {
		t.Errorf("..data changed from %q to %q without a change", before, after)
	}
	if n := mountCount(t, dir); n != 1 {
		t.Errorf("%d mounts after the second Setup, want 1", n)
	}

	// At the refresh time: a new token, swapped in, the old data removed.
	f.clk.SetTime(next)
	_, next3, err := f.p.Setup(context.Background(), pod, f.podDir)
	if err != nil {
		t.Fatal(err)
	}
	if want := next.Add(3607 * time.Second * 8 / 10); !next3.Equal(want) {
		t.Errorf("refresh at %v after a refresh, want %v", next3, want)
	}
	if got, _ := readVolFile(t, dir, "token"); got != tokenText(2) {
		t.Errorf("token after refresh = %.40q, want token 2", got)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{dataDir(t, dir), dataDirName, "ca.crt", "namespace", "token"}
	if d := cmp.Diff(want, names); d != "" {
		t.Errorf("volume entries after refresh (-want +got):\n%s", d)
	}

	// TeardownVolumes unmounts the tmpfs and removes the directory.
	if err := TeardownVolumes(f.podDir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(f.podDir, "volumes")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("volumes directory after teardown: %v", err)
	}
}

// TestProjectorAtomicRefresh reads the token while it is refreshed many
// times: every read sees a whole token.
func TestProjectorAtomicRefresh(t *testing.T) {
	f := newProjFixture(t, rootCA("CA"))
	pod := apiPod()
	pod.Spec.Volumes[0].Projected.Sources[0].ServiceAccountToken.ExpirationSeconds = utilptr.To[int64](600)
	ctx := context.Background()
	_, next, err := f.p.Setup(ctx, pod, f.podDir)
	if err != nil {
		t.Fatal(err)
	}
	const refreshes = 150
	valid := map[string]bool{}
	for i := 1; i <= refreshes+1; i++ {
		valid[tokenText(i)] = true
	}
	path := filepath.Join(f.podDir, "volumes", "projected", "kube-api-access-x2b4k", "token")
	var stop atomic.Bool
	var reads, gone atomic.Int64
	done := make(chan error, 1)
	go func() {
		for !stop.Load() {
			b, err := os.ReadFile(path)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				// The old data directory went between resolving ..data
				// and opening: kubelet's AtomicWriter has the same window.
				gone.Add(1)
			case err != nil:
				done <- err
				return
			case !valid[string(b)]:
				done <- fmt.Errorf("read a torn token of %d bytes: %.40q", len(b), b)
				return
			}
			reads.Add(1)
		}
		done <- nil
	}()
	for i := 0; i < refreshes; i++ {
		f.clk.SetTime(next)
		if _, next, err = f.p.Setup(ctx, pod, f.podDir); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := f.tokens.Count(); n != refreshes+1 {
		t.Errorf("%d token requests, want %d", n, refreshes+1)
	}
	t.Logf("%d reads, %d between swaps", reads.Load(), gone.Load())
}

func TestTokenRefreshAt(t *testing.T) {
	exp := projT0
	tests := []struct {
		lifetime time.Duration
		want     time.Time
	}{
		{10 * time.Minute, exp.Add(-2 * time.Minute)},
		{time.Hour, exp.Add(-12 * time.Minute)},
		{3607 * time.Second, exp.Add(-3607 * time.Second / 5)},
		{30 * time.Hour, exp.Add(-6 * time.Hour)},              // 80% = 24h: both rules agree
		{48 * time.Hour, exp.Add(-24 * time.Hour)},             // 24h old first
		{365 * 24 * time.Hour, exp.Add(-364 * 24 * time.Hour)}, // 24h old first
		{0, exp}, // degenerate: at expiry
		{time.Duration(1<<32) * time.Second, exp.Add(-(time.Duration(1<<32)*time.Second - 24*time.Hour))},
	}
	for _, tt := range tests {
		if got := tokenRefreshAt(exp, tt.lifetime); !got.Equal(tt.want) {
			t.Errorf("tokenRefreshAt(exp, %v) = exp%+v, want exp%+v", tt.lifetime, got.Sub(exp), tt.want.Sub(exp))
		}
	}
}

func TestProjectorTokenLifetimeShortenedByServer(t *testing.T) {
	f := newProjFixture(t, rootCA("CA"))
	f.tokens.SetLifetime(600)
	pod := apiPod()
	pod.Spec.Volumes[0].Projected.Sources[0].ServiceAccountToken.ExpirationSeconds = utilptr.To[int64](7200)
	_, next, err := f.p.Setup(context.Background(), pod, f.podDir)
	if err != nil {
		t.Fatal(err)
	}
	if want := projT0.Add(480 * time.Second); !next.Equal(want) {
		t.Errorf("refresh at %v, want %v (80%% of the 600s the server granted)", next, want)
	}
}

func TestProjectorTokenRefreshFailure(t *testing.T) {
	f := newProjFixture(t, rootCA("CA"))
	pod := apiPod()
	ctx := context.Background()
	_, next, err := f.p.Setup(ctx, pod, f.podDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(f.podDir, "volumes", "projected", "kube-api-access-x2b4k")
	f.tokens.SetFail(apierrors.NewServiceUnavailable("etcd is sad"))

	// The current token is kept and the refresh retried soon.
	f.clk.SetTime(next)
	_, retry, err := f.p.Setup(ctx, pod, f.podDir)
	if err != nil {
		t.Fatalf("Setup with a valid cached token: %v", err)
	}
	if want := next.Add(tokenRetry); !retry.Equal(want) {
		t.Errorf("retry at %v, want %v", retry, want)
	}
	if got, _ := readVolFile(t, dir, "token"); got != tokenText(1) {
		t.Errorf("token = %.30q, want the first one kept", got)
	}
	// Not before the retry time.
	if _, _, err := f.p.Setup(ctx, pod, f.podDir); err != nil {
		t.Fatal(err)
	}
	// The retry is capped at the expiry; once expired, Setup fails.
	exp := projT0.Add(3607 * time.Second)
	f.clk.SetTime(exp.Add(-time.Second))
	if _, retry, err = f.p.Setup(ctx, pod, f.podDir); err != nil || !retry.Equal(exp) {
		t.Errorf("Setup a second before expiry = %v, %v; want retry at the expiry %v", retry, err, exp)
	}
	f.clk.SetTime(exp)
	_, _, err = f.p.Setup(ctx, pod, f.podDir)
	for _, want := range []string{`volume "kube-api-access-x2b4k"`, "spec.volumes[0].projected.sources[0].serviceAccountToken",
		"service account default/default", "etcd is sad"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Setup with an expired token = %v, want an error containing %q", err, want)
		}
	}
	if !apierrors.IsServiceUnavailable(err) {
		t.Errorf("error %v does not wrap the API error", err)
	}
	// The old files stay until the pod goes.
	if got, _ := readVolFile(t, dir, "token"); got != tokenText(1) {
		t.Errorf("token after a failed Setup = %.30q, want the old one left in place", got)
	}
	// Recovery.
	f.tokens.SetFail(nil)
	if _, _, err := f.p.Setup(ctx, pod, f.podDir); err != nil {
		t.Fatal(err)
	}
	if got, _ := readVolFile(t, dir, "token"); got != tokenText(2) {
		t.Errorf("token after recovery = %.30q, want token 2", got)
	}
}

func TestProjectorConfigMaps(t *testing.T) {
	cm := &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app"},
		Data:       map[string]string{"a.conf": "A", "b.conf": "B"},
		BinaryData: map[string][]byte{"blob": {0, 1, 2}},
	}
	vol := func(defaultMode *int32, srcs ...v1.VolumeProjection) *v1.Pod {
		pod := apiPod()
		pod.Spec.Volumes = []v1.Volume{{Name: "cfg", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
			DefaultMode: defaultMode, Sources: srcs,
		}}}}
		return pod
	}
	cmSrc := func(name string, optional bool, items ...v1.KeyToPath) v1.VolumeProjection {
		return v1.VolumeProjection{ConfigMap: &v1.ConfigMapProjection{
			LocalObjectReference: v1.LocalObjectReference{Name: name}, Optional: &optional, Items: items,
		}}
	}
	type file struct {
		data string
		mode fs.FileMode
	}
	tests := []struct {
		desc    string
		pod     *v1.Pod
		want    map[string]file
		wantErr []string
	}{
		{"every key, defaultMode", vol(utilptr.To[int32](0o400), cmSrc("app", false)),
			map[string]file{"a.conf": {"A", 0o400}, "b.conf": {"B", 0o400}, "blob": {"\x00\x01\x02", 0o400}}, nil},
		{"no defaultMode: 0644", vol(nil, cmSrc("app", false)),
			map[string]file{"a.conf": {"A", 0o644}, "b.conf": {"B", 0o644}, "blob": {"\x00\x01\x02", 0o644}}, nil},
		{"items with paths and modes", vol(nil, cmSrc("app", false,
			v1.KeyToPath{Key: "a.conf", Path: "etc/app/a.conf", Mode: utilptr.To[int32](0o600)},
			v1.KeyToPath{Key: "blob", Path: "blob.bin"})),
			map[string]file{"etc/app/a.conf": {"A", 0o600}, "blob.bin": {"\x00\x01\x02", 0o644}}, nil},
		{"missing optional ConfigMap is skipped", vol(nil, cmSrc("nope", true), cmSrc("app", false, v1.KeyToPath{Key: "b.conf", Path: "b"})),
			map[string]file{"b": {"B", 0o644}}, nil},
		{"missing key of an optional ConfigMap is skipped", vol(nil, cmSrc("app", true, v1.KeyToPath{Key: "x", Path: "x"}, v1.KeyToPath{Key: "a.conf", Path: "a"})),
			map[string]file{"a": {"A", 0o644}}, nil},
		{"missing ConfigMap", vol(nil, cmSrc("app", false), cmSrc("nope", false)), nil,
			[]string{`MountVolume.SetUp failed for volume "cfg" : spec.volumes[0].projected.sources[1].configMap "nope": configmap "nope" not found`}},
		{"missing key", vol(nil, cmSrc("app", false, v1.KeyToPath{Key: "x", Path: "x"})), nil,
			[]string{`volume "cfg"`, `spec.volumes[0].projected.sources[0].configMap "app": configmap references non-existent config key: x`}},
		{"two sources write one path", vol(nil, cmSrc("app", false), cmSrc("app", false, v1.KeyToPath{Key: "a.conf", Path: "b.conf"})), nil,
			[]string{`spec.volumes[0].projected.sources[1].configMap "app": path "b.conf": used by an earlier source`}},
		{"reserved path", vol(nil, cmSrc("app", false, v1.KeyToPath{Key: "a.conf", Path: "..data"})), nil,
			[]string{`volume "cfg"`, `path "..data": must not start with '..'`}},
		{"escaping path", vol(nil, cmSrc("app", false, v1.KeyToPath{Key: "a.conf", Path: "x/../../../etc/passwd"})), nil,
			[]string{`must not contain '..'`}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			f := newProjFixture(t, cm)
			vols, next, err := f.p.Setup(context.Background(), tt.pod, f.podDir)
			if tt.wantErr != nil {
				for _, w := range tt.wantErr {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("Setup = %v, want an error containing %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !next.IsZero() {
				t.Errorf("refresh at %v, want never without tokens", next)
			}
			dir := vols["cfg"]
			got := map[string]file{}
			data := filepath.Join(dir, dataDirName)
			err = filepath.WalkDir(data+"/", func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				rel, _ := filepath.Rel(data, p)
				content, mode := readVolFile(t, dir, rel) // through the user-visible name
				got[rel] = file{content, mode}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got, cmp.AllowUnexported(file{})); d != "" {
				t.Errorf("files (-want +got):\n%s", d)
			}
		})
	}
}

func TestProjectorConfigMapWatched(t *testing.T) {
	f := newProjFixture(t, rootCA("CA 1"))
	ctx := context.Background()
	var mu sync.Mutex
	lists, watches := 0, 0
	f.client.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		lists++
		mu.Unlock()
		return false, nil, nil
	})
	f.client.PrependWatchReactor("configmaps", func(k8stesting.Action) (bool, watch.Interface, error) {
		mu.Lock()
		watches++
		mu.Unlock()
		return false, nil, nil
	})
	pod := apiPod()
	other := apiPod()
	other.Name, other.UID = "other", "uid-other"
	otherDir := filepath.Join(t.TempDir(), "other")
	t.Cleanup(func() { _ = TeardownVolumes(otherDir) })

	for _, setup := range []struct {
		pod *v1.Pod
		dir string
	}{{pod, f.podDir}, {other, otherDir}, {pod, f.podDir}} {
		if _, _, err := f.p.Setup(ctx, setup.pod, setup.dir); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	if lists != 1 {
		t.Errorf("%d ConfigMap lists for three Setups of two pods, want 1 (one watch)", lists)
	}
	mu.Unlock()

	// An update arrives through the watch and is written by the next Setup.
	// (The fake's watch does not replay what happened before it started.)
	backofftest.WaitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return watches > 0 }, "the watch")
	if _, err := f.client.CoreV1().ConfigMaps("default").Update(ctx, rootCA("CA 2"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(f.podDir, "volumes", "projected", "kube-api-access-x2b4k")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, _, err := f.p.Setup(ctx, pod, f.podDir); err != nil {
			t.Fatal(err)
		}
		if got, _ := readVolFile(t, dir, "ca.crt"); got == "CA 2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("ca.crt still not CA 2 10s after the update")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The token was not requested again for the ConfigMap change.
	if n := f.tokens.Count(); n != 2 {
		t.Errorf("%d token requests for two pods, want 2", n)
	}
}

func TestProjectorDownwardAPI(t *testing.T) {
	f := newProjFixture(t)
	pod := apiPod()
	pod.Labels = map[string]string{"app": "web", "tier": `fr"ont`}
	pod.Annotations = map[string]string{"note": "line1\nline2"}
	item := func(path, fp string, mode *int32) v1.DownwardAPIVolumeFile {
		return v1.DownwardAPIVolumeFile{Path: path, FieldRef: &v1.ObjectFieldSelector{FieldPath: fp}, Mode: mode}
	}
	pod.Spec.Volumes = []v1.Volume{{Name: "info", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		Sources: []v1.VolumeProjection{{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{
			item("name", "metadata.name", nil),
			item("ns", "metadata.namespace", nil),
			item("meta/uid", "metadata.uid", utilptr.To[int32](0o440)),
			item("labels", "metadata.labels", nil),
			item("annotations", "metadata.annotations", nil),
		}}}},
	}}}}
	vols, _, err := f.p.Setup(context.Background(), pod, f.podDir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"name": "web", "ns": "default", "meta/uid": "uid-web",
		"labels":      `app="web"` + "\n" + `tier="fr\"ont"`,
		"annotations": `note="line1\nline2"`,
	}
	for name, w := range want {
		got, mode := readVolFile(t, vols["info"], name)
		if got != w {
			t.Errorf("%s = %q, want %q", name, got, w)
		}
		wantMode := fs.FileMode(0o644)
		if name == "meta/uid" {
			wantMode = 0o440
		}
		if mode != wantMode {
			t.Errorf("%s mode = %v, want %v", name, mode, wantMode)
		}
	}
	if f.tokens.Count() != 0 || len(f.client.Actions()) != 0 {
		t.Errorf("a downwardAPI-only volume called the API server: %v", f.client.Actions())
	}

	// A label change rewrites the file.
	pod.Labels["app"] = "web2"
	if _, _, err := f.p.Setup(context.Background(), pod, f.podDir); err != nil {
		t.Fatal(err)
	}
	if got, _ := readVolFile(t, vols["info"], "labels"); !strings.HasPrefix(got, `app="web2"`) {
		t.Errorf("labels after a change = %q", got)
	}
}

func TestDownwardAPIValueErrors(t *testing.T) {
	pod := apiPod()
	tests := []struct {
		item v1.DownwardAPIVolumeFile
		want string
	}{
		{v1.DownwardAPIVolumeFile{Path: "x"}, "no fieldRef"},
		{v1.DownwardAPIVolumeFile{Path: "x", ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}}, "resourceFieldRef is not supported"},
		{v1.DownwardAPIVolumeFile{Path: "x", FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}, `unsupported fieldPath "spec.nodeName"`},
		{v1.DownwardAPIVolumeFile{Path: "x", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v2", FieldPath: "metadata.name"}}, `unsupported apiVersion "v2"`},
	}
	for _, tt := range tests {
		if _, err := downwardAPIValue(pod, tt.item); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("downwardAPIValue(%+v) = %v, want an error containing %q", tt.item, err, tt.want)
		}
	}
}

func TestProjectorErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("relative pod directory", func(t *testing.T) {
		p := newFakeProjector(fake.NewClientset(), testingclock.NewFakeClock(projT0), testlog.New(t))
		if _, _, err := p.Setup(ctx, apiPod(), "pod"); err == nil || !strings.Contains(err.Error(), "must be absolute") {
			t.Errorf("Setup = %v, want an error about the relative directory", err)
		}
	})
	t.Run("no service account", func(t *testing.T) {
		f := newProjFixture(t, rootCA("CA"))
		pod := apiPod()
		pod.Spec.ServiceAccountName = ""
		_, _, err := f.p.Setup(ctx, pod, f.podDir)
		if err == nil || !strings.Contains(err.Error(), "sources[0].serviceAccountToken: the pod has no serviceAccountName") {
			t.Errorf("Setup = %v", err)
		}
	})
	t.Run("token forbidden, ConfigMap missing: both named", func(t *testing.T) {
		f := newProjFixture(t)
		f.tokens.SetFail(apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts/token"}, "default", errors.New("no relationship found between node and this object")))
		_, _, err := f.p.Setup(ctx, apiPod(), f.podDir)
		for _, want := range []string{
			`MountVolume.SetUp failed for volume "kube-api-access-x2b4k" : `,
			"spec.volumes[0].projected.sources[0].serviceAccountToken: request a token for service account default/default",
			"no relationship found",
			`spec.volumes[0].projected.sources[1].configMap "kube-root-ca.crt": configmap "kube-root-ca.crt" not found`,
		} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Setup = %v, want an error containing %q", err, want)
			}
		}
		if !apierrors.IsForbidden(err) {
			t.Errorf("error %v does not wrap the API error", err)
		}
		// Nothing was mounted for a volume that failed.
		if _, err := os.Lstat(filepath.Join(f.podDir, "volumes", "projected", "kube-api-access-x2b4k")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("volume directory after a failed Setup: %v", err)
		}
	})
	t.Run("unsupported source", func(t *testing.T) {
		f := newProjFixture(t, rootCA("CA"))
		pod := apiPod()
		pod.Spec.Volumes[0].Projected.Sources[2] = v1.VolumeProjection{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{}}
		_, _, err := f.p.Setup(ctx, pod, f.podDir)
		if err == nil || !strings.Contains(err.Error(), "spec.volumes[0].projected.sources[2]: unsupported source") {
			t.Errorf("Setup = %v", err)
		}
	})
}

func TestProjectorTokenCacheGC(t *testing.T) {
	f := newProjFixture(t, rootCA("CA"))
	ctx := context.Background()
	pod := apiPod()
	if _, _, err := f.p.Setup(ctx, pod, f.podDir); err != nil {
		t.Fatal(err)
	}
	f.p.Forget(pod.UID)
	if n := len(f.p.tokens.cache); n != 0 {
		t.Errorf("%d cached tokens after Forget, want 0", n)
	}
	if _, _, err := f.p.Setup(ctx, pod, f.podDir); err != nil {
		t.Fatal(err)
	}
	if n := f.tokens.Count(); n != 2 {
		t.Errorf("%d token requests, want 2 (the forgotten token is requested again)", n)
	}
	// Another pod's Setup after the first pod's token expired drops it.
	other := apiPod()
	other.Name, other.UID = "other", "uid-other"
	otherDir := filepath.Join(t.TempDir(), "other")
	t.Cleanup(func() { _ = TeardownVolumes(otherDir) })
	f.clk.Step(3607 * time.Second)
	if _, _, err := f.p.Setup(ctx, other, otherDir); err != nil {
		t.Fatal(err)
	}
	for k := range f.p.tokens.cache {
		if k.pod == pod.UID {
			t.Errorf("expired token of a gone pod still cached: %+v", k)
		}
	}
}

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	write := func(payload map[string]fileProjection) bool {
		t.Helper()
		changed, err := writeAtomic(dir, payload, projT0)
		if err != nil {
			t.Fatal(err)
		}
		return changed
	}
	p1 := map[string]fileProjection{"a": {[]byte("1"), 0o644}, "sub/b": {[]byte("2"), 0o600}}
	if !write(p1) {
		t.Error("first write reported no change")
	}
	if write(p1) {
		t.Error("identical payload rewritten")
	}
	// A mode change alone is a change.
	p2 := map[string]fileProjection{"a": {[]byte("1"), 0o400}, "sub/b": {[]byte("2"), 0o600}}
	if !write(p2) {
		t.Error("mode change not written")
	}
	if _, mode := readVolFile(t, dir, "a"); mode != 0o400 {
		t.Errorf("mode of a = %v, want 0400", mode)
	}
	// A file that leaves the payload disappears with its link.
	if !write(map[string]fileProjection{"a": {[]byte("1"), 0o400}}) {
		t.Error("removal not written")
	}
	if _, err := os.Lstat(filepath.Join(dir, "sub")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("sub after removal: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 { // ..<ts>, ..data, a
		t.Errorf("entries %v, want the data directory, ..data and a", entries)
	}
	// A missing user-visible link is repaired without a rewrite.
	if err := os.Remove(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	if write(map[string]fileProjection{"a": {[]byte("1"), 0o400}}) {
		t.Error("link repair rewrote the data")
	}
	if got, _ := readVolFile(t, dir, "a"); got != "1" {
		t.Errorf("a = %q after repair", got)
	}
	// Bad input.
	for _, bad := range []map[string]fileProjection{
		{"/abs": {nil, 0o644}},
		{"a/./b": {nil, 0o644}},
		{"": {nil, 0o644}},
		{strings.Repeat("x", 256): {nil, 0o644}},
		{"ok": {nil, 0o1777}},
	} {
		if _, err := writeAtomic(dir, bad, projT0); err == nil {
			t.Errorf("writeAtomic(%v) accepted it", bad)
		}
	}
}

func TestSetupVolumesSkipsProjected(t *testing.T) {
	podDir := filepath.Join(t.TempDir(), "pod")
	pod := volPod(podtest.KubeAPIAccess(), hostPathVol("hp", "/", ""))
	vols, err := SetupVolumes(podDir, pod)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{"hp": "/"}, vols); d != "" {
		t.Errorf("SetupVolumes (-want +got):\n%s", d)
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, podtest.KubeAPIAccess())
	if _, err := SetupVolumes(podDir, pod); err == nil || !strings.Contains(err.Error(), "duplicate name") {
		t.Errorf("SetupVolumes with two projected volumes of one name = %v, want a duplicate name error", err)
	}
}

// TestProjectorConcurrentPods: workers of different pods call Setup at
// once (run with -race).
func TestProjectorConcurrentPods(t *testing.T) {
	f := newProjFixture(t, rootCA("CA"))
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		pod := apiPod()
		pod.Name, pod.UID = fmt.Sprintf("web-%d", i), types.UID(fmt.Sprintf("uid-%d", i))
		dir := filepath.Join(t.TempDir(), "pod")
		t.Cleanup(func() { _ = TeardownVolumes(dir) })
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 3; j++ {
				if _, _, err := f.p.Setup(context.Background(), pod, dir); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := f.tokens.Count(); got != n {
		t.Errorf("%d token requests for %d pods, want one each", got, n)
	}
}

// newFakeProjector is a Projector that reads through client-go's fake
// Clientset, as cmd/nodeagent wires it to the agent's own client: tokens
// from the TokenRequest API, Secrets and ConfigMaps through watched caches.
func newFakeProjector(client *fake.Clientset, clk clock.Clock, log *slog.Logger) *Projector {
	return NewProjectorWithOptions(ProjectorOptions{
		Client:     func(ns string) ServiceAccountClient { return client.CoreV1().ServiceAccounts(ns) },
		Secrets:    objcache.NewSecrets(client.CoreV1().Secrets, log),
		ConfigMaps: objcache.NewConfigMaps(client.CoreV1().ConfigMaps, log),
		Clock:      clk,
		Logger:     log,
	})
}
