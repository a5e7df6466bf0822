package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/cm/devicemanager/checkpoint"
	"github.com/nodeagent/nodeagent/kubetypes"

	"github.com/nodeagent/nodeagent/cm/topologymanager"
)

// Kubelet's constants.
const (
	// SocketName is the registration socket in the device-plugins directory.
	SocketName = "kubelet.sock"
	// EndpointStopGracePeriod is how long a plugin that went away keeps
	// its resource (kubelet's endpointStopGracePeriod).
	EndpointStopGracePeriod = 5 * time.Minute
	// DialTimeout bounds dialing a plugin and each unary RPC to it
	// (kubelet's connection timeout for plugin clients).
	DialTimeout = 10 * time.Second
)

// Kubelet's registration error messages.
const (
	errUnsupportedVersion  = "requested API version %q is not supported by kubelet. Supported version is %q"
	errInvalidResourceName = "the ResourceName %q is invalid"
)

// Options configure a Manager.
type Options struct {
	// Dir is the device-plugins directory (<rootDir>/device-plugins).
	Dir    string
	Clock  clock.Clock  // default: the real clock
	Logger *slog.Logger // default: slog.Default()
	// ContainerRunning reports whether container name of pod uid runs
	// (kubelet's isContainerAlreadyRunning): a running container's
	// checkpointed devices are kept at re-admission even when its plugin
	// has not re-registered yet. nil: never.
	ContainerRunning func(uid types.UID, name string) bool
	// Changed, when set, is called after the devices of a resource
	// changed (node status may want to report); it must not block.
	Changed func()
	// Align is the topology manager, asked with each container's hints
	// before its devices are allocated (nil: none).
	Align topologymanager.Checker
	// Registerer gets kubelet's device plugin metrics
	// (kubelet_device_plugin_registration_total,
	// kubelet_device_plugin_alloc_duration_seconds); nil: not registered.
	Registerer prometheus.Registerer
}

// Manager is the device manager. Create with New, then Start.
type Manager struct {
	opts  Options
	log   *slog.Logger
	clock clock.Clock
	met   *metrics

	// cpMu orders checkpoint writes: each one snapshots the state and
	// writes it before the next one snapshots (no stale overwrite).
	cpMu sync.Mutex
	// streams are the plugins' ListAndWatch goroutines; done is closed
	// once Start's context ended and all of them returned.
	streams sync.WaitGroup
	done    chan struct{}

	mu         sync.Mutex
	endpoints  map[string]*endpoint
	healthy    map[string]sets.Set[string]
	unhealthy  map[string]sets.Set[string]
	devices    map[string]map[string]*pluginapi.Device // all devices by resource and ID
	pods       podDevices
	allocated  map[string]sets.Set[string] // derived from pods
	server     *grpc.Server
	listenDone chan struct{}
}

// endpoint is one registered plugin; client is nil for a resource
// restored from the checkpoint whose plugin has not registered since.
type endpoint struct {
	resource string
	conn     *grpc.ClientConn
	client   pluginapi.DevicePluginClient
	opts     *pluginapi.DevicePluginOptions
	stopTime time.Time
}

func (e *endpoint) stopped() bool { return !e.stopTime.IsZero() }

// New returns a Manager; it does nothing until Start.
func New(o Options) *Manager {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Manager{
		opts: o, log: o.Logger, clock: o.Clock, met: newMetrics(o.Registerer), done: make(chan struct{}),
		endpoints: map[string]*endpoint{},
		healthy:   map[string]sets.Set[string]{},
		unhealthy: map[string]sets.Set[string]{},
		devices:   map[string]map[string]*pluginapi.Device{},
		pods:      podDevices{},
		allocated: map[string]sets.Set[string]{},
	}
}

// Start reads the checkpoint, removes stale sockets from the directory
// (plugins watch for kubelet.sock's re-creation and register again) and
// serves the registration socket until ctx ends.
func (m *Manager) Start(ctx context.Context) error {
	if err := os.MkdirAll(m.opts.Dir, 0o750); err != nil {
		return fmt.Errorf("device plugins: %w", err)
	}
	if err := m.readCheckpoint(); err != nil {
		// kubelet continues with an empty state too.
		m.log.Error("device manager checkpoint not restored", "err", err)
	}
	names, err := os.ReadDir(m.opts.Dir)
	if err != nil {
		return fmt.Errorf("device plugins: %w", err)
	}
	for _, n := range names {
		if n.IsDir() || n.Name() == checkpoint.FileName {
			continue
		}
		if err := os.Remove(filepath.Join(m.opts.Dir, n.Name())); err != nil {
			m.log.Error("cannot remove a stale device plugin socket", "file", n.Name(), "err", err)
		}
	}
	l, err := net.Listen("unix", filepath.Join(m.opts.Dir, SocketName))
	if err != nil {
		return fmt.Errorf("device plugins: %w", err)
	}
	// Stop waits for Register calls in flight: no plugin stream starts
	// after the manager stopped.
	srv := grpc.NewServer(grpc.WaitForHandlers(true))
	pluginapi.RegisterRegistrationServer(srv, registration{m: m})
	m.mu.Lock()
	m.server, m.listenDone = srv, make(chan struct{})
	done := m.listenDone
	m.mu.Unlock()
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil {
			m.log.Error("device plugin registration server ended", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		m.stop()
		m.streams.Wait()
		close(m.done)
	}()
	return nil
}

// Done is closed once the context given to Start ended and the manager
// stopped (registration server and plugin streams ended).
func (m *Manager) Done() <-chan struct{} { return m.done }

// stop ends the registration server and every plugin connection.
func (m *Manager) stop() {
	m.mu.Lock()
	srv, done := m.server, m.listenDone
	var conns []*grpc.ClientConn
	for _, e := range m.endpoints {
		if e.conn != nil {
			conns = append(conns, e.conn)
		}
	}
	m.mu.Unlock()
	if srv != nil {
		srv.Stop()
		<-done
	}
	for _, c := range conns {
		c.Close()
	}
}

type registration struct {
	m *Manager
	pluginapi.UnimplementedRegistrationServer
}

// Register is the plugins' registration RPC, with kubelet's checks and
// messages.
func (r registration) Register(ctx context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	m := r.m
	log := m.log.With("resource", req.ResourceName)
	log.Info("device plugin registration", "endpoint", req.Endpoint, "version", req.Version)
	m.met.registrations.WithLabelValues(req.ResourceName).Inc()
	if !versionSupported(req.Version) {
		err := fmt.Errorf(errUnsupportedVersion, req.Version, pluginapi.SupportedVersions)
		log.Error("bad device plugin registration", "err", err)
		return &pluginapi.Empty{}, err
	}
	if !kubetypes.IsExtendedResourceName(v1.ResourceName(req.ResourceName)) {
		err := fmt.Errorf(errInvalidResourceName, req.ResourceName)
		log.Error("bad device plugin registration", "err", err)
		return &pluginapi.Empty{}, err
	}
	if err := m.connect(req.ResourceName, filepath.Join(m.opts.Dir, req.Endpoint)); err != nil {
		log.Error("cannot connect to device plugin", "err", err)
		return &pluginapi.Empty{}, err
	}
	return &pluginapi.Empty{}, nil
}

func versionSupported(v string) bool {
	for _, s := range pluginapi.SupportedVersions {
		if v == s {
			return true
		}
	}
	return false
}

// connect dials the plugin, reads its options, makes it the resource's
// endpoint and follows its ListAndWatch stream.
func (m *Manager) connect(resourceName, socket string) error {
	conn, err := grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("failed to dial device plugin: %w", err)
	}
	client := pluginapi.NewDevicePluginClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), DialTimeout)
	defer cancel()
	opts, err := client.GetDevicePluginOptions(ctx, &pluginapi.Empty{}, grpc.WaitForReady(true))
	if err != nil {
		conn.Close()
		return fmt.Errorf("failed to get device plugin options: %w", err)
	}
	e := &endpoint{resource: resourceName, conn: conn, client: client, opts: opts}
	m.mu.Lock()
	old := m.endpoints[resourceName]
	m.endpoints[resourceName] = e
	if _, ok := m.healthy[resourceName]; !ok {
		m.healthy[resourceName] = sets.New[string]()
	}
	m.mu.Unlock()
	if old != nil && old.conn != nil {
		old.conn.Close()
	}
	m.streams.Add(1)
	go func() {
		defer m.streams.Done()
		m.listAndWatch(e)
	}()
	return nil
}

// listAndWatch follows the plugin's device list until its stream ends,
// then marks the resource's devices unhealthy.
func (m *Manager) listAndWatch(e *endpoint) {
	log := m.log.With("resource", e.resource)
	stream, err := e.client.ListAndWatch(context.Background(), &pluginapi.Empty{})
	if err == nil {
		for {
			var resp *pluginapi.ListAndWatchResponse
			resp, err = stream.Recv()
			if err != nil {
				break
			}
			m.update(e, resp.Devices)
		}
	}
	log.Info("device plugin's ListAndWatch ended", "err", err)
	m.disconnected(e)
}

// update replaces a resource's devices with a plugin's latest list.
func (m *Manager) update(e *endpoint, devs []*pluginapi.Device) {
	m.mu.Lock()
	if m.endpoints[e.resource] != e {
		m.mu.Unlock()
		return
	}
	healthy, unhealthy := sets.New[string](), sets.New[string]()
	all := make(map[string]*pluginapi.Device, len(devs))
	for _, d := range devs {
		all[d.ID] = d
		if d.Health == pluginapi.Healthy {
			healthy.Insert(d.ID)
		} else {
			unhealthy.Insert(d.ID)
		}
	}
	m.healthy[e.resource], m.unhealthy[e.resource], m.devices[e.resource] = healthy, unhealthy, all
	m.mu.Unlock()
	m.log.Info("device plugin devices", "resource", e.resource, "healthy", healthy.Len(), "unhealthy", unhealthy.Len())
	m.checkpoint()
	m.changed()
}

// disconnected is kubelet's PluginDisconnected: every device of the
// resource turns unhealthy and the endpoint's grace starts.
func (m *Manager) disconnected(e *endpoint) {
	m.mu.Lock()
	if m.endpoints[e.resource] != e {
		m.mu.Unlock()
		return
	}
	e.stopTime = m.clock.Now()
	u := m.unhealthy[e.resource]
	if u == nil {
		u = sets.New[string]()
	}
	m.unhealthy[e.resource] = u.Union(m.healthy[e.resource])
	m.healthy[e.resource] = sets.New[string]()
	m.mu.Unlock()
	e.conn.Close()
	m.changed()
}

func (m *Manager) changed() {
	if m.opts.Changed != nil {
		m.opts.Changed()
	}
}

// Capacity is kubelet's GetCapacity: each registered resource's devices
// as capacity (healthy and unhealthy) and its healthy ones as
// allocatable; resources whose plugin went away more than
// EndpointStopGracePeriod ago are dropped and returned once in removed.
func (m *Manager) Capacity() (capacity, allocatable v1.ResourceList, removed []string) {
	capacity, allocatable = v1.ResourceList{}, v1.ResourceList{}
	now := m.clock.Now()
	m.mu.Lock()
	dropped := false
	for name := range unionKeys(m.healthy, m.unhealthy) {
		e, ok := m.endpoints[name]
		if !ok || (e.stopped() && now.Sub(e.stopTime) > EndpointStopGracePeriod) {
			delete(m.endpoints, name)
			delete(m.healthy, name)
			delete(m.unhealthy, name)
			delete(m.devices, name)
			removed = append(removed, name)
			dropped = true
			continue
		}
		h, u := int64(m.healthy[name].Len()), int64(m.unhealthy[name].Len())
		capacity[v1.ResourceName(name)] = *resource.NewQuantity(h+u, resource.DecimalSI)
		allocatable[v1.ResourceName(name)] = *resource.NewQuantity(h, resource.DecimalSI)
	}
	m.mu.Unlock()
	if dropped {
		m.checkpoint()
	}
	return capacity, allocatable, removed
}

func unionKeys(a, b map[string]sets.Set[string]) sets.Set[string] {
	s := sets.New[string]()
	for k := range a {
		s.Insert(k)
	}
	for k := range b {
		s.Insert(k)
	}
	return s
}

// AllocatableDevices are the healthy devices of every resource (for the
// pod-resources API's GetAllocatableResources).
func (m *Manager) AllocatableDevices() map[string][]*pluginapi.Device {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]*pluginapi.Device{}
	for name, ids := range m.healthy {
		for _, id := range sets.List(ids) {
			if d := m.devices[name][id]; d != nil {
				out[name] = append(out[name], d)
			} else {
				out[name] = append(out[name], &pluginapi.Device{ID: id, Health: pluginapi.Healthy})
			}
		}
	}
	return out
}

// checkpoint writes the allocations and registered devices; a failure is
// logged (kubelet logs it too and keeps going).
func (m *Manager) checkpoint() {
	m.cpMu.Lock()
	defer m.cpMu.Unlock()
	m.mu.Lock()
	entries := m.pods.entries()
	registered := map[string][]string{}
	for name, ids := range m.healthy {
		registered[name] = sets.List(ids.Union(m.unhealthy[name]))
	}
	for name, ids := range m.unhealthy {
		if _, ok := registered[name]; !ok {
			registered[name] = sets.List(ids)
		}
	}
	m.mu.Unlock()
	if err := checkpoint.Write(m.opts.Dir, entries, registered); err != nil {
		m.log.Error("cannot write the device manager checkpoint", "err", err)
	}
}

// readCheckpoint restores allocations; every registered resource gets a
// stopped endpoint without devices (its plugin must register again), as
// kubelet does, so that it goes away after the grace if it never does.
func (m *Manager) readCheckpoint() error {
	entries, registered, err := checkpoint.Read(m.opts.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pods.restore(entries, m.log)
	m.allocated = m.pods.devices()
	now := m.clock.Now()
	for name := range registered {
		m.healthy[name] = sets.New[string]()
		m.endpoints[name] = &endpoint{resource: name, stopTime: now}
	}
	return nil
}
