package volume

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/testing/backofftest"
	"github.com/nodeagent/nodeagent/kubetypes"
)

func secretObj(name string, data map[string]string) *v1.Secret {
	s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// volFiles reads every file of a volume through its user-visible names.
func volFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	data := filepath.Join(dir, dataDirName)
	err := filepath.WalkDir(data+"/", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(data, p)
		content, mode := readVolFile(t, dir, rel)
		got[rel] = content + " " + mode.String()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestProjectorSecretAndConfigMapVolumes(t *testing.T) {
	sec := secretObj("creds", map[string]string{"user": "admin", "pass": "s3cret"})
	cm := &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app"},
		Data:       map[string]string{"a.conf": "A"},
		BinaryData: map[string][]byte{"blob": {0, 1}},
	}
	secVol := func(name string, optional bool, mode *int32, items ...v1.KeyToPath) v1.Volume {
		return v1.Volume{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{
			SecretName: name, Optional: &optional, DefaultMode: mode, Items: items}}}
	}
	cmVol := func(name string, optional bool, items ...v1.KeyToPath) v1.Volume {
		return v1.Volume{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: name}, Optional: &optional, Items: items}}}
	}
	tests := []struct {
		desc    string
		vol     v1.Volume
		want    map[string]string
		wantErr string
	}{
		{"secret: every key, defaultMode", secVol("creds", false, utilptr.To[int32](0o400)),
			map[string]string{"user": "admin -r--------", "pass": "s3cret -r--------"}, ""},
		{"secret: items with mode", secVol("creds", false, nil, v1.KeyToPath{Key: "pass", Path: "db/password", Mode: utilptr.To[int32](0o600)}),
			map[string]string{"db/password": "s3cret -rw-------"}, ""},
		{"secret: missing, optional: empty volume", secVol("nope", true, nil), map[string]string{}, ""},
		{"secret: missing key, optional: skipped", secVol("creds", true, nil, v1.KeyToPath{Key: "x", Path: "x"}, v1.KeyToPath{Key: "user", Path: "u"}),
			map[string]string{"u": "admin -rw-r--r--"}, ""},
		{"secret: missing, required", secVol("nope", false, nil), nil,
			`MountVolume.SetUp failed for volume "s" : secret "nope" not found`},
		{"secret: missing key, required", secVol("creds", false, nil, v1.KeyToPath{Key: "x", Path: "x"}), nil,
			`MountVolume.SetUp failed for volume "s" : references non-existent secret key: x`},
		{"configMap: data and binaryData", cmVol("app", false), map[string]string{"a.conf": "A -rw-r--r--", "blob": "\x00\x01 -rw-r--r--"}, ""},
		{"configMap: missing, required", cmVol("nope", false), nil,
			`MountVolume.SetUp failed for volume "c" : configmap "nope" not found`},
		{"configMap: missing key", cmVol("app", false, v1.KeyToPath{Key: "x", Path: "x"}), nil,
			`MountVolume.SetUp failed for volume "c" : configmap references non-existent config key: x`},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			f := newProjFixture(t, sec, cm)
			pod := apiPod()
			pod.Spec.Volumes = []v1.Volume{tt.vol}
			vols, _, err := NewManager(f.p, nil).Setup(context.Background(), pod, f.podDir)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Setup = %v, want %q", err, tt.wantErr)
				}
				if mes := MountErrors(err); len(mes) != 1 || mes[0].Volume != tt.vol.Name {
					t.Errorf("MountErrors = %v", mes)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, volFiles(t, vols[tt.vol.Name])); d != "" {
				t.Errorf("files (-want +got):\n%s", d)
			}
			if tt.vol.Secret != nil {
				if st := statfs(t, vols[tt.vol.Name]); st.Type != unix.TMPFS_MAGIC {
					t.Errorf("secret volume is on fs type %#x, want tmpfs", st.Type)
				}
			}
		})
	}
}

func TestProjectorMissingThenCreated(t *testing.T) {
	f := newProjFixture(t)
	pod := apiPod()
	pod.Spec.Volumes = []v1.Volume{{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "later"}}}}
	ctx := context.Background()
	var watches atomic.Int32
	f.client.PrependWatchReactor("secrets", func(k8stesting.Action) (bool, watch.Interface, error) {
		watches.Add(1)
		return false, nil, nil
	})
	if _, _, err := f.p.Setup(ctx, pod, f.podDir); !apierrors.IsNotFound(err) {
		t.Fatalf("Setup = %v, want NotFound", err)
	}
	// (The fake's watch does not replay what happened before it started.)
	backofftest.WaitFor(t, func() bool { return watches.Load() > 0 }, "the watch")
	if _, err := f.client.CoreV1().Secrets("default").Create(ctx, secretObj("later", map[string]string{"k": "v"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var vols map[string]string
	backofftest.WaitFor(t, func() bool {
		var err error
		vols, _, err = f.p.Setup(ctx, pod, f.podDir)
		return err == nil
	}, "the secret to be seen")
	if got, _ := readVolFile(t, vols["s"], "k"); got != "v" {
		t.Errorf("k = %q", got)
	}
	// An update is written by a later Setup; Forget stops the watch.
	s := secretObj("later", map[string]string{"k": "v2", "new": "n"})
	if _, err := f.client.CoreV1().Secrets("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	backofftest.WaitFor(t, func() bool {
		if _, _, err := f.p.Setup(ctx, pod, f.podDir); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(vols["s"], "new"))
		return string(b) == "n"
	}, "the update")
	if got, _ := readVolFile(t, vols["s"], "k"); got != "v2" {
		t.Errorf("k after the update = %q", got)
	}
}

func TestProjectorStaticPodRefused(t *testing.T) {
	f := newProjFixture(t, secretObj("creds", nil))
	pod := apiPod()
	pod.Annotations = map[string]string{kubetypes.AnnotationConfigSource: kubetypes.SourceFile}
	pod.Spec.Volumes = []v1.Volume{{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "creds"}}}}
	_, _, err := f.p.Setup(context.Background(), pod, f.podDir)
	if err == nil || !strings.Contains(err.Error(), `secret "creds": static pods cannot reference API objects`) {
		t.Errorf("Setup = %v", err)
	}
}

func TestProjectorDownwardAPIVolume(t *testing.T) {
	f := newProjFixture(t)
	f.p.node = func() *v1.Node {
		return &v1.Node{Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")}}}
	}
	pod := apiPod()
	pod.Labels = map[string]string{"app": "web"}
	pod.Annotations = map[string]string{"note": "hi"}
	pod.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
		Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("32Mi")},
	}}}
	ref := func(res, div string) *v1.ResourceFieldSelector {
		r := &v1.ResourceFieldSelector{ContainerName: "c", Resource: res}
		if div != "" {
			r.Divisor = resource.MustParse(div)
		}
		return r
	}
	pod.Spec.Volumes = []v1.Volume{{Name: "d", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
		DefaultMode: utilptr.To[int32](0o444),
		Items: []v1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "note", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.annotations['note']"}, Mode: utilptr.To[int32](0o400)},
			{Path: "cpu_limit", ResourceFieldRef: ref("limits.cpu", "1m")},
			{Path: "cpu_limit_cores", ResourceFieldRef: ref("limits.cpu", "")},
			{Path: "mem_limit", ResourceFieldRef: ref("limits.memory", "1Mi")},
			{Path: "mem_request", ResourceFieldRef: ref("requests.memory", "1Mi")},
			{Path: "cpu_request", ResourceFieldRef: ref("requests.cpu", "")},
		},
	}}}}
	vols, _, err := f.p.Setup(context.Background(), pod, f.podDir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"labels":          `app="web" -r--r--r--`,
		"note":            "hi -r--------",
		"cpu_limit":       "250 -r--r--r--",
		"cpu_limit_cores": "1 -r--r--r--", // rounded up
		"mem_limit":       "8192 -r--r--r--",
		"mem_request":     "32 -r--r--r--",
		"cpu_request":     "0 -r--r--r--",
	}
	if d := cmp.Diff(want, volFiles(t, vols["d"])); d != "" {
		t.Errorf("files (-want +got):\n%s", d)
	}
	// New labels are written by the next Setup (the pod's update).
	pod.Labels["tier"] = "front"
	if _, _, err := f.p.Setup(context.Background(), pod, f.podDir); err != nil {
		t.Fatal(err)
	}
	if got, _ := readVolFile(t, vols["d"], "labels"); got != "app=\"web\"\ntier=\"front\"" {
		t.Errorf("labels after the update = %q", got)
	}
	// Unknown container.
	pod.Spec.Volumes[0].DownwardAPI.Items[2].ResourceFieldRef.ContainerName = "nope"
	if _, _, err := f.p.Setup(context.Background(), pod, f.podDir); err == nil || !strings.Contains(err.Error(), `container "nope" not found`) {
		t.Errorf("Setup = %v", err)
	}
}

func TestResourceFieldValue(t *testing.T) {
	c := &v1.Container{Resources: v1.ResourceRequirements{
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m"), v1.ResourceMemory: resource.MustParse("64Mi"), "hugepages-2Mi": resource.MustParse("4Mi")},
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
	}}
	alloc := v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("10Gi")}
	for _, tt := range []struct {
		res, div, want, err string
	}{
		{"limits.cpu", "", "2", ""},
		{"limits.cpu", "1m", "1500", ""},
		{"limits.cpu", "100m", "15", ""},
		{"requests.cpu", "1m", "100", ""},
		{"limits.memory", "", "67108864", ""},
		{"limits.memory", "1Mi", "64", ""},
		{"limits.memory", "1M", "68", ""}, // 67.1 rounded up
		{"limits.ephemeral-storage", "1Gi", "10", ""},
		{"requests.ephemeral-storage", "1Mi", "1024", ""},
		{"limits.hugepages-2Mi", "1Mi", "4", ""},
		{"requests.memory", "", "0", ""},
		{"limits.gpu", "", "", "unsupported resource"},
		{"cpu", "", "", "unsupported resource"},
	} {
		ref := &v1.ResourceFieldSelector{Resource: tt.res}
		if tt.div != "" {
			ref.Divisor = resource.MustParse(tt.div)
		}
		got, err := ResourceFieldValue(c, ref, alloc)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s/%s: err %v, want %q", tt.res, tt.div, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s/%s = %q, %v; want %q", tt.res, tt.div, got, err, tt.want)
		}
	}
}

// TestWriteAtomicReaders: readers that open the volume through ..data
// while it is rewritten over and over see one whole set of files: never a
// half-written file and never files of two versions.
func TestWriteAtomicReaders(t *testing.T) {
	dir := t.TempDir()
	payload := func(n byte) map[string]fileProjection {
		data := bytes.Repeat([]byte{'0' + n}, 256<<10)
		return map[string]fileProjection{"a": {data: data, mode: 0o644}, "sub/b": {data: data, mode: 0o644}}
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := writeAtomic(dir, payload(0), now); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var (
		wg           sync.WaitGroup
		reads, mixed int
		bad          []string
		mu           sync.Mutex
	)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				d, err := os.Open(filepath.Join(dir, dataDirName))
				if err != nil {
					continue // between the swap and... never, but be safe
				}
				a, errA := readAt(d, "a")
				b, errB := readAt(d, "sub/b")
				d.Close()
				if errA != nil || errB != nil {
					continue // the old version was removed after we opened it
				}
				mu.Lock()
				reads++
				if !bytes.Equal(a, b) {
					mixed++
				}
				if len(a) != 256<<10 || bytes.Count(a, a[:1]) != len(a) {
					bad = append(bad, "partial a")
				}
				// The user-visible names resolve to whole files too.
				if v, err := os.ReadFile(filepath.Join(dir, "a")); err == nil && (len(v) != 256<<10 || bytes.Count(v, v[:1]) != len(v)) {
					bad = append(bad, "partial a through the visible link")
				}
				mu.Unlock()
			}
		}()
	}
	for i := range 100 {
		if _, err := writeAtomic(dir, payload(byte(1+i%2)), now.Add(time.Duration(i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	if mixed > 0 || len(bad) > 0 {
		t.Errorf("%d of %d reads saw two versions; bad: %v", mixed, reads, bad)
	}
	if reads == 0 {
		t.Error("no complete read")
	}
	t.Logf("%d consistent reads", reads)
}

func readAt(d *os.File, name string) ([]byte, error) {
	fd, err := unix.Openat(int(d.Fd()), name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(f)
	return buf.Bytes(), err
}

func TestMountErrors(t *testing.T) {
	a := &MountError{Volume: "a", Err: errors.New("x")}
	b := &MountError{Volume: "b", Err: apierrors.NewNotFound(secretResource, "s")}
	err := errors.Join(a, errors.New("other"), b)
	if got := MountErrors(err); len(got) != 2 || got[0] != a || got[1] != b {
		t.Errorf("MountErrors = %v", got)
	}
	if !apierrors.IsNotFound(err) {
		t.Error("the joined error hides NotFound")
	}
	if MountErrors(errors.New("x")) != nil {
		t.Error("MountErrors of a plain error")
	}
}

// With a pod fsGroup, the files of a secret volume belong to that group
// and it may read them (kubelet's volume ownership of read-only volumes).
func TestProjectorFSGroup(t *testing.T) {
	f := newProjFixture(t, secretObj("creds", map[string]string{"user": "admin"}))
	pod := apiPod()
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: utilptr.To[int64](1234)}
	pod.Spec.Volumes = []v1.Volume{{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{
		SecretName: "creds", DefaultMode: utilptr.To[int32](0o400)}}}}
	vols, _, err := f.p.Setup(context.Background(), pod, f.podDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"user", ".", dataDirName} {
		fi, err := os.Stat(filepath.Join(vols["s"], p))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		want := fs.FileMode(0o440)
		if fi.IsDir() {
			want = fs.ModeDir | fs.ModeSetgid | 0o755
		}
		if st.Gid != 1234 || fi.Mode() != want {
			t.Errorf("%s: gid %d mode %v, want gid 1234 mode %v", p, st.Gid, fi.Mode(), want)
		}
	}
	// A second Setup finds nothing to rewrite.
	before := dataDir(t, vols["s"])
	if _, _, err := f.p.Setup(context.Background(), pod, f.podDir); err != nil {
		t.Fatal(err)
	}
	if after := dataDir(t, vols["s"]); after != before {
		t.Errorf("data directory rewritten without a change: %s → %s", before, after)
	}
}

// Without an API server, downwardAPI volumes work and the others fail
// with a clear error.
func TestProjectorWithoutClient(t *testing.T) {
	needRootForVolumes(t)
	podDir := filepath.Join(t.TempDir(), "pod")
	t.Cleanup(func() { _ = TeardownVolumes(podDir) })
	p := NewProjectorWithOptions(ProjectorOptions{})
	pod := apiPod()
	pod.Annotations = map[string]string{"a": "b"}
	pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "d", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
		Items: []v1.DownwardAPIVolumeFile{{Path: "a", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.annotations"}}}}}})
	_, _, err := p.Setup(context.Background(), pod, podDir)
	mes := MountErrors(err)
	if len(mes) != 1 || mes[0].Volume != "kube-api-access-x2b4k" || !strings.Contains(err.Error(), "no API server") {
		t.Fatalf("Setup = %v, want only the kube-api-access volume to fail", err)
	}
	pod.Spec.Volumes = pod.Spec.Volumes[1:]
	vols, _, err := p.Setup(context.Background(), pod, podDir)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := readVolFile(t, vols["d"], "a"); got != `a="b"` {
		t.Errorf("a = %q", got)
	}
}
