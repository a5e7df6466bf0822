package devicemanager

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/runtime"
)

const res = "example.com/dev"

// fakePlugin is a device plugin: a real gRPC server on a unix socket.
type fakePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	opts    *pluginapi.DevicePluginOptions
	updates chan []*pluginapi.Device
	srv     *grpc.Server
	socket  string

	mu        sync.Mutex
	allocated [][]string
	preStart  [][]string
	preferred []string // answer to GetPreferredAllocation
}

func startPlugin(t *testing.T, dir, name string, opts *pluginapi.DevicePluginOptions) *fakePlugin {
	t.Helper()
	p := &fakePlugin{opts: opts, updates: make(chan []*pluginapi.Device, 4), socket: filepath.Join(dir, name)}
	l, err := net.Listen("unix", p.socket)
	if err != nil {
		t.Fatal(err)
	}
	p.srv = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.srv, p)
	go p.srv.Serve(l)
	t.Cleanup(p.srv.Stop)
	return p
}

func (p *fakePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return p.opts, nil
}

func (p *fakePlugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	for {
		select {
		case devs := <-p.updates:
			if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
				return err
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

func (p *fakePlugin) Allocate(_ context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := &pluginapi.AllocateResponse{}
	for _, cr := range r.ContainerRequests {
		p.allocated = append(p.allocated, cr.DevicesIds)
		resp := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"DEVS": strings.Join(cr.DevicesIds, ",")},
			Annotations: map[string]string{"example.com/devs": strings.Join(cr.DevicesIds, ",")}}
		for _, id := range cr.DevicesIds {
			resp.Mounts = append(resp.Mounts, &pluginapi.Mount{HostPath: "/tmp", ContainerPath: "/dev-" + id, ReadOnly: true})
			resp.Devices = append(resp.Devices, &pluginapi.DeviceSpec{HostPath: "/dev/null", ContainerPath: "/dev/" + id, Permissions: "rw"})
			resp.CdiDevices = append(resp.CdiDevices, &pluginapi.CDIDevice{Name: "example.com/dev=" + id})
		}
		out.ContainerResponses = append(out.ContainerResponses, resp)
	}
	return out, nil
}

func (p *fakePlugin) GetPreferredAllocation(_ context.Context, r *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return &pluginapi.PreferredAllocationResponse{ContainerResponses: []*pluginapi.ContainerPreferredAllocationResponse{{DeviceIDs: p.preferred}}}, nil
}

func (p *fakePlugin) PreStartContainer(_ context.Context, r *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.preStart = append(p.preStart, r.DevicesIds)
	return &pluginapi.PreStartContainerResponse{}, nil
}

func (p *fakePlugin) calls() (allocated, preStart [][]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.allocated), slices.Clone(p.preStart)
}

func devs(health ...string) []*pluginapi.Device {
	var out []*pluginapi.Device
	for i, h := range health {
		out = append(out, &pluginapi.Device{ID: "d" + string(rune('0'+i)), Health: h})
	}
	return out
}

type env struct {
	t       *testing.T
	dir     string
	clock   *clocktesting.FakeClock
	m       *Manager
	cancel  context.CancelFunc
	changed chan struct{}
	running map[string]bool // podUID/container
}

func newEnv(t *testing.T, dir string) *env {
	t.Helper()
	e := &env{t: t, dir: dir, clock: clocktesting.NewFakeClock(time.Unix(1000, 0)), changed: make(chan struct{}, 100), running: map[string]bool{}}
	var mu sync.Mutex
	e.m = New(Options{Dir: dir, Clock: e.clock, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		Changed: func() {
			select {
			case e.changed <- struct{}{}:
			default:
			}
		},
		ContainerRunning: func(uid types.UID, name string) bool {
			mu.Lock()
			defer mu.Unlock()
			return e.running[string(uid)+"/"+name]
		}})
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	if err := e.m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		<-e.m.Done() // no goroutine of the manager logs after the test
	})
	return e
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func register(t *testing.T, dir string, req *pluginapi.RegisterRequest) error {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, SocketName), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, req, grpc.WaitForReady(true))
	return err
}

// waitFor polls cond (bounded): plugin streams are real goroutines.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func capAlloc(m *Manager) (int64, int64, bool) {
	c, a, _ := m.Capacity()
	cq, ok := c[res]
	aq := a[res]
	return cq.Value(), aq.Value(), ok
}

func (e *env) plugin(name string, opts *pluginapi.DevicePluginOptions, d []*pluginapi.Device) *fakePlugin {
	e.t.Helper()
	p := startPlugin(e.t, e.dir, name, opts)
	if err := register(e.t, e.dir, &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: name, ResourceName: res}); err != nil {
		e.t.Fatal(err)
	}
	p.updates <- d
	healthy := 0
	for _, x := range d {
		if x.Health == pluginapi.Healthy {
			healthy++
		}
	}
	waitFor(e.t, "devices", func() bool {
		c, a, ok := capAlloc(e.m)
		return ok && c == int64(len(d)) && a == int64(healthy)
	})
	return p
}

func pod(uid string, init []int64, ctrs ...int64) *v1.Pod {
	mk := func(name string, n int64) v1.Container {
		c := v1.Container{Name: name, Image: "busybox"}
		if n > 0 {
			c.Resources.Limits = v1.ResourceList{res: *resource.NewQuantity(n, resource.DecimalSI), v1.ResourceCPU: resource.MustParse("1")}
		}
		return c
	}
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: uid, Namespace: "default"}}
	for i, n := range init {
		p.Spec.InitContainers = append(p.Spec.InitContainers, mk("init"+string(rune('0'+i)), n))
	}
	for i, n := range ctrs {
		p.Spec.Containers = append(p.Spec.Containers, mk("c"+string(rune('0'+i)), n))
	}
	return p
}

func TestRegisterValidatesAsKubelet(t *testing.T) {
	e := newEnv(t, t.TempDir())
	for _, tc := range []struct {
		desc string
		req  *pluginapi.RegisterRequest
		want string
	}{
		{"old version", &pluginapi.RegisterRequest{Version: "v1alpha", Endpoint: "p.sock", ResourceName: res},
			`requested API version "v1alpha" is not supported by kubelet. Supported version is ["v1beta1"]`},
		{"not an extended resource", &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "p.sock", ResourceName: "cpu"},
			`the ResourceName "cpu" is invalid`},
		{"kubernetes.io prefix", &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "p.sock", ResourceName: "kubernetes.io/gpu"},
			`the ResourceName "kubernetes.io/gpu" is invalid`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := register(t, e.dir, tc.req)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Register = %v, want %q", err, tc.want)
			}
		})
	}
	if c, _, _ := e.m.Capacity(); len(c) != 0 {
		t.Errorf("capacity after refused registrations = %v, want none", c)
	}
}

func TestCapacityFollowsHealthAndPluginLoss(t *testing.T) {
	e := newEnv(t, t.TempDir())
	p := e.plugin("p.sock", &pluginapi.DevicePluginOptions{}, devs(pluginapi.Healthy, pluginapi.Healthy))

	p.updates <- devs(pluginapi.Healthy, pluginapi.Unhealthy)
	waitFor(t, "one unhealthy", func() bool { c, a, _ := capAlloc(e.m); return c == 2 && a == 1 })

	p.srv.Stop() // the plugin goes away: its stream ends
	waitFor(t, "allocatable 0", func() bool { c, a, _ := capAlloc(e.m); return c == 2 && a == 0 })

	e.clock.Step(EndpointStopGracePeriod)
	if c, a, ok := capAlloc(e.m); !ok || c != 2 || a != 0 {
		t.Fatalf("at the end of the grace: capacity %d allocatable %d present %v; want 2 0 true", c, a, ok)
	}
	e.clock.Step(time.Second)
	c, _, removed := e.m.Capacity()
	if _, ok := c[res]; ok || !slices.Equal(removed, []string{res}) {
		t.Fatalf("after the grace: capacity %v removed %v; want gone and removed once", c, removed)
	}
	if _, _, removed := e.m.Capacity(); len(removed) != 0 {
		t.Errorf("removed reported again: %v", removed)
	}
}

func TestAllocateAndRunOptions(t *testing.T) {
	e := newEnv(t, t.TempDir())
	p := e.plugin("p.sock", &pluginapi.DevicePluginOptions{PreStartRequired: true}, devs(pluginapi.Healthy, pluginapi.Healthy))

	a := pod("a", nil, 1)
	if err := e.m.Allocate(a, nil); err != nil {
		t.Fatal(err)
	}
	allocated, _ := p.calls()
	if len(allocated) != 1 || len(allocated[0]) != 1 {
		t.Fatalf("plugin Allocate calls = %v, want one with one device", allocated)
	}
	id := allocated[0][0]
	opts, err := e.m.RunOptions(context.Background(), a, &a.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	want := RunContainerOptions{
		Devices:     []runtime.Device{{HostPath: "/dev/null", ContainerPath: "/dev/" + id, Permissions: "rw"}},
		Mounts:      []runtime.Mount{{HostPath: "/tmp", ContainerPath: "/dev-" + id, ReadOnly: true}},
		Env:         []string{"DEVS=" + id},
		Annotations: map[string]string{"example.com/devs": id},
		CDIDevices:  []string{"example.com/dev=" + id},
	}
	if d := cmp.Diff(want, opts); d != "" {
		t.Errorf("RunOptions (-want +got):\n%s", d)
	}
	if _, preStart := p.calls(); !cmp.Equal(preStart, [][]string{{id}}) {
		t.Errorf("PreStartContainer calls = %v, want [[%s]]", preStart, id)
	}

	if n := promtestutil.ToFloat64(e.m.met.registrations.WithLabelValues(res)); n != 1 {
		t.Errorf("kubelet_device_plugin_registration_total = %v, want 1", n)
	}
	if n := promtestutil.CollectAndCount(e.m.met.allocDuration); n != 1 {
		t.Errorf("kubelet_device_plugin_alloc_duration_seconds series = %d, want 1", n)
	}
	// Re-admission of the same pod allocates nothing new.
	if err := e.m.Allocate(a, nil); err != nil {
		t.Fatal(err)
	}
	if allocated, _ := p.calls(); len(allocated) != 1 {
		t.Errorf("re-admission called Allocate again: %v", allocated)
	}

	// Beyond capacity: kubelet's message.
	b := pod("b", nil, 2)
	err = e.m.Allocate(b, []*v1.Pod{a})
	const msg = "requested number of devices unavailable for example.com/dev. Requested: 2, Available: 1"
	if err == nil || err.Error() != msg {
		t.Fatalf("Allocate beyond capacity = %v, want %q", err, msg)
	}
	// The failed attempt holds nothing: one device is still free.
	if err := e.m.Allocate(pod("c", nil, 1), []*v1.Pod{a}); err != nil {
		t.Fatalf("Allocate of the last device = %v", err)
	}
	// Pod a is no longer active: its device is freed.
	if err := e.m.Allocate(pod("d", nil, 1), []*v1.Pod{pod("c", nil, 1)}); err != nil {
		t.Fatalf("Allocate after pod a went away = %v", err)
	}
	if got := e.m.ContainerDevicesOf("a", "c0"); len(got) != 0 {
		t.Errorf("pod a still holds %v", got)
	}
}

func TestAllocateRefusals(t *testing.T) {
	e := newEnv(t, t.TempDir())
	// Not a plugin's resource: nothing to do (the fit decides).
	if err := e.m.Allocate(pod("x", nil, 1), nil); err != nil {
		t.Fatalf("Allocate of an unknown resource = %v, want nil", err)
	}
	p := e.plugin("p.sock", &pluginapi.DevicePluginOptions{}, devs(pluginapi.Unhealthy))
	const msg = "no healthy devices present; cannot allocate unhealthy devices example.com/dev"
	if err := e.m.Allocate(pod("a", nil, 1), nil); err == nil || err.Error() != msg {
		t.Fatalf("Allocate with no healthy device = %v, want %q", err, msg)
	}
	_ = p
}

func TestPreferredAllocation(t *testing.T) {
	e := newEnv(t, t.TempDir())
	p := e.plugin("p.sock", &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true},
		devs(pluginapi.Healthy, pluginapi.Healthy, pluginapi.Healthy))
	p.preferred = []string{"d2"}
	if err := e.m.Allocate(pod("a", nil, 1), nil); err != nil {
		t.Fatal(err)
	}
	if allocated, _ := p.calls(); !cmp.Equal(allocated, [][]string{{"d2"}}) {
		t.Errorf("Allocate calls = %v, want the preferred device [[d2]]", allocated)
	}
}

func TestInitContainerDevicesReused(t *testing.T) {
	e := newEnv(t, t.TempDir())
	p := e.plugin("p.sock", &pluginapi.DevicePluginOptions{}, devs(pluginapi.Healthy))
	// One device: the init container's is reused by the app container.
	if err := e.m.Allocate(pod("a", []int64{1}, 1), nil); err != nil {
		t.Fatal(err)
	}
	if allocated, _ := p.calls(); !cmp.Equal(allocated, [][]string{{"d0"}, {"d0"}}) {
		t.Errorf("Allocate calls = %v, want d0 twice", allocated)
	}
}

// An agent restart keeps a running container's devices: they are in the
// checkpoint, re-admission keeps them before the plugin is back, and no
// other pod gets them after it is.
func TestCheckpointSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, dir)
	e.plugin("p.sock", &pluginapi.DevicePluginOptions{}, devs(pluginapi.Healthy, pluginapi.Healthy))
	a := pod("a", nil, 1)
	if err := e.m.Allocate(a, nil); err != nil {
		t.Fatal(err)
	}
	held := e.m.ContainerDevicesOf("a", "c0")
	e.cancel()
	<-e.m.Done()

	e2 := newEnv(t, dir)
	if _, err := os.Stat(filepath.Join(dir, "p.sock")); !os.IsNotExist(err) {
		t.Errorf("stale plugin socket kept: %v", err)
	}
	if got := e2.m.ContainerDevicesOf("a", "c0"); !cmp.Equal(got, held) {
		t.Fatalf("restored devices = %v, want %v", got, held)
	}
	if c, a, ok := capAlloc(e2.m); !ok || c != 0 || a != 0 {
		t.Errorf("before the plugin re-registers: capacity %d allocatable %d present %v; want 0 0 true", c, a, ok)
	}
	// Re-admission of the running pod before the plugin is back.
	e2.running["a/c0"] = true
	if err := e2.m.Allocate(a, nil); err != nil {
		t.Fatalf("re-admission of a running pod = %v", err)
	}
	if got := e2.m.SanitizeAllocatable(v1.ResourceList{res: resource.MustParse("0")}); got.Name(res, resource.DecimalSI).Value() != 1 {
		t.Errorf("SanitizeAllocatable = %v, want %s raised to 1", got, res)
	}
	p := e2.plugin("p2.sock", &pluginapi.DevicePluginOptions{}, devs(pluginapi.Healthy, pluginapi.Healthy))
	if err := e2.m.Allocate(pod("b", nil, 2), []*v1.Pod{a}); err == nil {
		t.Fatal("pod b got both devices while pod a holds one")
	}
	if err := e2.m.Allocate(pod("b", nil, 1), []*v1.Pod{a}); err != nil {
		t.Fatal(err)
	}
	allocated, _ := p.calls()
	if len(allocated) != 1 || slices.Contains(held[0].ByNUMA[-1], allocated[0][0]) {
		t.Errorf("pod b got %v, pod a holds %v", allocated, held)
	}
}

// A plugin that registers again (a new socket, as after its own restart)
// replaces its previous connection; the old stream's end does not mark
// the new one's devices unhealthy.
func TestReRegistrationReplaces(t *testing.T) {
	e := newEnv(t, t.TempDir())
	old := e.plugin("old.sock", &pluginapi.DevicePluginOptions{}, devs(pluginapi.Healthy, pluginapi.Healthy))
	e.m.mu.Lock()
	oldEndpoint := e.m.endpoints[res]
	e.m.mu.Unlock()
	e.plugin("new.sock", &pluginapi.DevicePluginOptions{}, devs(pluginapi.Healthy, pluginapi.Healthy, pluginapi.Healthy))
	old.srv.Stop()
	// The old stream's end, whenever it comes (here after the new devices).
	e.m.disconnected(oldEndpoint)
	e.m.update(oldEndpoint, devs(pluginapi.Unhealthy))
	if c, a, _ := capAlloc(e.m); c != 3 || a != 3 {
		t.Errorf("after the old plugin's stream ended: capacity %d allocatable %d, want 3 3", c, a)
	}
	if err := e.m.Allocate(pod("a", nil, 1), nil); err != nil {
		t.Fatalf("Allocate through the new registration = %v", err)
	}
}
