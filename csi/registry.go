package csi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/util/flowcontrol"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/clock"
)

// Kubelet's timeouts: dialTimeoutDuration of the plugin manager's
// operation generator, csiTimeout of pkg/volume/csi.
const (
	dialTimeout = 10 * time.Second
	csiTimeout  = 2 * time.Minute
)

// Registration retries, as kubelet's nested pending operations back off a
// failed registration: from 500 ms, doubling, to 2 min 2 s.
const (
	registerBackoffInitial = 500 * time.Millisecond
	registerBackoffMax     = 2*time.Minute + 2*time.Second
)

// rescanPeriod is kubelet's plugin manager reconciler period
// (loopSleepDuration): events are the detector, the rescan the safety net
// and the retry tick.
const rescanPeriod = time.Second

// NodeInfoHandler is told about drivers that register and deregister
// (*NodeInfo implements it).
type NodeInfoHandler interface {
	InstallDriver(ctx context.Context, name string, info *csipb.NodeGetInfoResponse) error
	UninstallDriver(ctx context.Context, name string) error
}

// Driver is a registered CSI driver.
type Driver struct {
	Name     string
	Endpoint string
	version  *utilversion.Version
	conn     *grpc.ClientConn
	// Node is the driver's CSI Node service.
	Node csipb.NodeClient
}

type registration struct {
	name string
	key  socketKey
}

// socketKey tells a socket from a new one at the same path.
type socketKey struct {
	ino   uint64
	mtime time.Time
}

// Registry registers the CSI drivers whose registrar sockets appear in its
// directory. Run drives it; Sync is one reconciliation.
type Registry struct {
	dir   string
	info  NodeInfoHandler
	clock clock.WithTicker
	log   *slog.Logger

	// mu guards drivers; held only to read or swap entries, never over RPCs.
	mu      sync.Mutex
	drivers map[string]*Driver

	// Owned by the goroutine that calls Sync.
	registered map[string]registration // by socket path
	backoff    *flowcontrol.Backoff
}

// NewRegistry watches dir (kubelet's <rootDir>/plugins_registry).
func NewRegistry(dir string, info NodeInfoHandler, clk clock.WithTicker, log *slog.Logger) *Registry {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if log == nil {
		log = slog.Default()
	}
	b := flowcontrol.NewBackOff(registerBackoffInitial, registerBackoffMax)
	b.Clock = clk
	return &Registry{
		dir: dir, info: info, clock: clk, log: log,
		drivers:    map[string]*Driver{},
		registered: map[string]registration{},
		backoff:    b,
	}
}

// Driver returns the registered driver of that name.
func (r *Registry) Driver(name string) (*Driver, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.drivers[name]
	return d, ok
}

// Drivers lists the names of the registered drivers, sorted.
func (r *Registry) Drivers() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.drivers))
	for n := range r.drivers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Run creates the directory (0750, as kubelet), watches it and reconciles
// on every change and every second until ctx ends; then it closes the
// drivers' connections (the CSINode entries stay, as under kubelet).
func (r *Registry) Run(ctx context.Context) error {
	if err := os.MkdirAll(r.dir, 0o750); err != nil {
		return fmt.Errorf("plugin registration directory: %w", err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("plugin registration watcher: %w", err)
	}
	defer w.Close()
	if err := w.Add(r.dir); err != nil {
		return fmt.Errorf("plugin registration watcher: %w", err)
	}
	defer r.closeAll()
	t := r.clock.NewTicker(rescanPeriod)
	defer t.Stop()
	for {
		r.Sync(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-w.Events:
		case err := <-w.Errors:
			r.log.Warn("plugin registration watcher", "err", err)
		case <-t.C():
		}
	}
}

func (r *Registry) closeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.drivers {
		d.conn.Close()
	}
}

// Sync reconciles the registered drivers with the sockets in the
// directory: a socket gone (or replaced) deregisters its driver, a new one
// is registered, a failed registration is retried after its back-off.
// Files whose names start with "." are ignored, as by kubelet's watcher.
func (r *Registry) Sync(ctx context.Context) {
	sockets, err := listSockets(r.dir)
	if err != nil {
		r.log.Warn("listing plugin registration sockets", "dir", r.dir, "err", err)
		return
	}
	for path, reg := range r.registered {
		if k, ok := sockets[path]; !ok || k != reg.key {
			r.deregister(ctx, path, reg)
		}
	}
	now := r.clock.Now()
	paths := make([]string, 0, len(sockets))
	for p := range sockets {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, path := range paths {
		if _, ok := r.registered[path]; ok {
			continue
		}
		id := path + "@" + fmt.Sprint(sockets[path])
		if r.backoff.IsInBackOffSinceUpdate(id, now) {
			continue
		}
		name, err := r.register(ctx, path)
		if err != nil {
			r.backoff.Next(id, now)
			r.log.Warn("registering plugin", "socket", path, "err", err)
			continue
		}
		r.backoff.Reset(id)
		r.registered[path] = registration{name: name, key: sockets[path]}
	}
}

func listSockets(dir string) (map[string]socketKey, error) {
	es, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]socketKey{}
	for _, e := range es {
		if strings.HasPrefix(e.Name(), ".") || e.Type()&fs.ModeSocket == 0 {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		out[filepath.Join(dir, e.Name())] = keyOf(fi)
	}
	return out, nil
}

// register is kubelet's RegisterPlugin operation: GetInfo on the
// registration socket, the CSI handler's validation and registration, and
// the status back to the registrar. Its errors are kubelet's.
func (r *Registry) register(ctx context.Context, socket string) (string, error) {
	conn, err := dialUnix(socket)
	if err != nil {
		return "", fmt.Errorf("RegisterPlugin error -- dial failed at socket %s, err: %v", socket, err)
	}
	defer conn.Close()
	client := registerapi.NewRegistrationClient(conn)
	ictx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	info, err := client.GetInfo(ictx, &registerapi.InfoRequest{})
	if err != nil {
		return "", fmt.Errorf("RegisterPlugin error -- failed to get plugin info using RPC GetInfo at socket %s, err: %v", socket, err)
	}
	notify := func(ok bool, msg string) error {
		nctx, cancel := context.WithTimeout(ctx, dialTimeout)
		defer cancel()
		if _, err := client.NotifyRegistrationStatus(nctx, &registerapi.RegistrationStatus{PluginRegistered: ok, Error: msg}); err != nil {
			return fmt.Errorf("RegisterPlugin error -- failed to send registration status at socket %s, err: %v", socket, err)
		}
		return nil
	}
	if info.Type != registerapi.CSIPlugin {
		msg := fmt.Sprintf("RegisterPlugin error -- no handler registered for plugin type: %s at socket %s", info.Type, socket)
		return "", errors.Join(errors.New(msg), notify(false, msg))
	}
	endpoint := info.Endpoint
	if endpoint == "" {
		endpoint = socket
	}
	version, err := r.validateVersions("ValidatePlugin", info.Name, info.SupportedVersions)
	if err != nil {
		err = fmt.Errorf("validation failed for CSI Driver %s at endpoint %s: %v", info.Name, endpoint, err)
		return "", errors.Join(err, notify(false, fmt.Sprintf("RegisterPlugin error -- plugin validation failed with err: %v", err)))
	}
	if err := r.registerDriver(ctx, info.Name, endpoint, version); err != nil {
		return "", errors.Join(err, notify(false, fmt.Sprintf("RegisterPlugin error -- plugin registration failed with err: %v", err)))
	}
	if err := notify(true, ""); err != nil {
		r.unregisterDriver(ctx, info.Name)
		return "", err
	}
	r.log.Info("registered CSI driver", "driver", info.Name, "endpoint", endpoint, "version", version.String())
	return info.Name, nil
}

// validateVersions is kubelet's: the highest 1.x (or 0.x) version the
// driver names, higher than that of a driver of the same name that is
// registered already.
func (r *Registry) validateVersions(caller, name string, versions []string) (*utilversion.Version, error) {
	if len(versions) == 0 {
		return nil, fmt.Errorf("csi: %s for CSI driver %q failed. Plugin returned an empty list for supported versions", caller, name)
	}
	v, err := utilversion.HighestSupportedVersion(versions)
	if err != nil {
		return nil, fmt.Errorf("csi: %s for CSI driver %q failed. None of the versions specified %q are supported. err=%v", caller, name, versions, err)
	}
	if d, ok := r.Driver(name); ok && !d.version.LessThan(v) {
		return nil, fmt.Errorf("csi: %s for CSI driver %q failed. Another driver with the same name is already registered with a higher supported version: %q", caller, name, d.version)
	}
	return v, nil
}

// registerDriver connects to the driver, asks NodeGetInfo and installs it
// in the CSINode and Node objects.
func (r *Registry) registerDriver(ctx context.Context, name, endpoint string, version *utilversion.Version) error {
	conn, err := dialUnix(endpoint)
	if err != nil {
		return err
	}
	d := &Driver{Name: name, Endpoint: endpoint, version: version, conn: conn, Node: csipb.NewNodeClient(conn)}
	ictx, cancel := context.WithTimeout(ctx, csiTimeout)
	defer cancel()
	info, err := d.Node.NodeGetInfo(ictx, &csipb.NodeGetInfoRequest{})
	if err != nil {
		conn.Close()
		return err
	}
	if r.info != nil {
		if err := r.info.InstallDriver(ctx, name, info); err != nil {
			conn.Close()
			return err
		}
	}
	r.mu.Lock()
	old := r.drivers[name]
	r.drivers[name] = d
	r.mu.Unlock()
	if old != nil {
		old.conn.Close()
	}
	return nil
}

func (r *Registry) deregister(ctx context.Context, socket string, reg registration) {
	delete(r.registered, socket)
	r.log.Info("deregistering CSI driver: its registration socket is gone", "driver", reg.name, "socket", socket)
	r.unregisterDriver(ctx, reg.name)
}

func (r *Registry) unregisterDriver(ctx context.Context, name string) {
	r.mu.Lock()
	d := r.drivers[name]
	delete(r.drivers, name)
	r.mu.Unlock()
	if d != nil {
		d.conn.Close()
	}
	if r.info != nil {
		if err := r.info.UninstallDriver(ctx, name); err != nil {
			r.log.Warn("uninstalling CSI driver", "driver", name, "err", err)
		}
	}
}

// dialUnix returns a gRPC connection to a unix socket (connected lazily,
// as kubelet's CSI client).
func dialUnix(path string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix:"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

func keyOf(fi fs.FileInfo) socketKey {
	k := socketKey{mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		k.ino = st.Ino
	}
	return k
}
