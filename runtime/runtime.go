package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/errdefs"
	"github.com/containerd/containerd/images"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/platforms"
	"github.com/nodeagent/nodeagent/crilog"
	"github.com/opencontainers/cgroups"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"
)

// Options configure a Runtime. Zero values take the documented defaults.
type Options struct {
	// Address of containerd's gRPC socket ("/run/containerd/containerd.sock"
	// or "unix:///run/containerd/containerd.sock"). Required.
	Address string
	// Namespace is the containerd namespace; default "k8s.io".
	Namespace string
	// CallTimeout bounds every call to containerd; default 10s.
	CallTimeout time.Duration
	// PullProgressTimeout cancels an image pull that has a request open
	// to the registry and received no byte for this long (containerd CRI's
	// image_pull_progress_timeout); a pull that makes progress is never
	// cut off. Default 5m; negative: never.
	PullProgressTimeout time.Duration
	// RegistryConfigPath is containerd's registry config_path: one or
	// more directories (separated by ':') with a <host>/hosts.toml per
	// registry (mirrors, CA, client certificates, skip_verify) in
	// containerd's layout. "" means none: every registry is used
	// directly.
	RegistryConfigPath string
	// StartTimeout bounds creating or starting one container (snapshot,
	// shim, runc): under load these take far longer than a plain call, and
	// giving up throws finished work away; default 2m (kubelet's
	// runtimeRequestTimeout default; the agent sets it from that field,
	// and CallTimeout to at most it).
	StartTimeout time.Duration
	// DialTimeout bounds the initial connection; default 10s.
	DialTimeout time.Duration
	// Snapshotter used for container root filesystems; default "overlayfs".
	Snapshotter string
	// CgroupParent is the default parent cgroup (cgroupfs path) of pods;
	// default "/nodeagent".
	CgroupParent string
	// SystemdCgroup makes containers' cgroups systemd scopes in their
	// pod's slice (cgroupsPath "<slice>:cri-containerd:<id>", runc's
	// SystemdCgroup option) instead of cgroupfs directories.
	SystemdCgroup bool
	// SingleProcessOOMKill is kubelet's singleProcessOOMKill: on cgroup
	// v2, false (kubelet's default there) sets memory.oom.group to 1 in
	// every container's cgroup, so that an OOM kill takes the whole
	// container; true leaves it 0 (the kernel kills one process). Ignored
	// on cgroup v1, which has no such setting.
	SingleProcessOOMKill bool
	// ContainerLogger is the absolute path of the executable containerd's
	// shim starts per container (a binary:// log URI) to write the
	// container's stdout and stderr to its LogPath in the CRI format with
	// rotation (see package crilog; the agent passes its own executable,
	// which dispatches on crilog.IsLoggerInvocation). Empty: the shim
	// appends the raw output to LogPath itself, without format or rotation.
	ContainerLogger string
	// LogRotation limits each container's log files when ContainerLogger
	// is set; zero values take kubelet's defaults (10 MiB, 5 files).
	LogRotation crilog.Rotation
	// ContainerLogsDir, when set, holds a symlink to each started
	// container's log file, named as kubelet names those in
	// /var/log/containers (see logsymlinks.go). It must be absolute.
	ContainerLogsDir string
	// CDISpecDirs are the directories of CDI spec files that resolve
	// ContainerSpec.CDIDevices; nil: DefaultCDISpecDirs (containerd's).
	CDISpecDirs []string
	// Logger receives the adapter's few logs; default slog.Default().
	Logger *slog.Logger
	// Clock drives backoff and grace periods; default the real clock.
	Clock clock.WithTicker
}

// Defaults.
const (
	DefaultNamespace           = "k8s.io"
	DefaultCallTimeout         = 10 * time.Second
	DefaultPullProgressTimeout = 5 * time.Minute
	DefaultStartTimeout        = 2 * time.Minute
	DefaultSnapshotter         = "overlayfs"
	DefaultCgroupParent        = "/nodeagent"
)

func (o *Options) setDefaults() error {
	if o.Address == "" {
		return errors.New("runtime: containerd address is required")
	}
	o.Address = strings.TrimPrefix(o.Address, "unix://")
	if o.ContainerLogger != "" && !filepath.IsAbs(o.ContainerLogger) {
		return fmt.Errorf("runtime: container logger %q must be an absolute path", o.ContainerLogger)
	}
	if o.ContainerLogsDir != "" && !filepath.IsAbs(o.ContainerLogsDir) {
		return fmt.Errorf("runtime: container logs directory %q must be an absolute path", o.ContainerLogsDir)
	}
	if o.LogRotation.MaxSize == 0 {
		o.LogRotation.MaxSize = crilog.DefaultMaxSize
	}
	if o.LogRotation.MaxFiles == 0 {
		o.LogRotation.MaxFiles = crilog.DefaultMaxFiles
	}
	if o.CDISpecDirs == nil {
		o.CDISpecDirs = DefaultCDISpecDirs
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.CallTimeout < 0 {
		return fmt.Errorf("runtime: negative call timeout %s", o.CallTimeout)
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.StartTimeout < 0 {
		return fmt.Errorf("runtime: negative start timeout %s", o.StartTimeout)
	}
	if o.PullProgressTimeout == 0 {
		o.PullProgressTimeout = DefaultPullProgressTimeout
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	if o.Snapshotter == "" {
		o.Snapshotter = DefaultSnapshotter
	}
	if o.CgroupParent == "" {
		o.CgroupParent = DefaultCgroupParent
	}
	if !strings.HasPrefix(o.CgroupParent, "/") {
		return fmt.Errorf("runtime: cgroup parent %q must be an absolute cgroupfs path", o.CgroupParent)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return nil
}

// Runtime is the containerd adapter. All methods are safe for concurrent use.
type Runtime struct {
	opts   Options
	client *containerd.Client

	stop context.CancelFunc // ends the task event watcher

	users imageUsers // image config users, for runAsNonRoot

	// contentFacts: what an image's content says for this platform (its
	// ID and size), by the image's target digest (images.go).
	contentFacts sync.Map

	specs specCache // facts decoded once from containers' OCI specs (specfacts.go)

	// unified: the host has the unified cgroup v2 hierarchy, where
	// unprivileged containers get a private cgroup namespace (New).
	unified bool
	// cgroupRoot is the unified hierarchy's mount point, where the OOM
	// kill counters are read (oomkill.go).
	cgroupRoot string
	// stopping holds the IDs of containers StopContainer was asked to
	// stop: their SIGKILL is the agent's, not an OOM kill (oomkill.go).
	stopping sync.Map
	// oomLogged holds the IDs of containers whose OOM kill decideOOM has
	// logged: the exit recorder and StopContainer may both decide the same
	// exit, and the journal gets one line (oomkill.go).
	oomLogged sync.Map
	// listPod replaces the containerd query of podContainers in tests.
	listPod func(ctx context.Context, uid string) ([]containers.Container, error)

	cdi *cdiRegistry // CDI devices (cdi.go)
}

// New connects to containerd. It fails if containerd cannot be reached
// within Options.DialTimeout.
func New(opts Options) (*Runtime, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	client, err := containerd.New(opts.Address,
		containerd.WithDefaultNamespace(opts.Namespace),
		containerd.WithTimeout(opts.DialTimeout))
	if err != nil {
		return nil, fmt.Errorf("runtime: connect to containerd at %s: %w", opts.Address, err)
	}
	ctx, stop := context.WithCancel(context.Background())
	r := &Runtime{opts: opts, client: client, stop: stop, unified: cgroups.IsCgroup2UnifiedMode(), cgroupRoot: cgroup2Root, cdi: &cdiRegistry{dirs: opts.CDISpecDirs}}
	go r.watchTasks(ctx)
	return r, nil
}

// Close stops the adapter's background work and closes the connection.
func (r *Runtime) Close() error {
	r.stop()
	return r.client.Close()
}

// Namespace returns the containerd namespace the runtime works in.
func (r *Runtime) Namespace() string { return r.opts.Namespace }

// callCtx derives the context of one containerd call: namespace and timeout.
func (r *Runtime) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx = namespaces.WithNamespace(ctx, r.opts.Namespace)
	return context.WithTimeout(ctx, r.opts.CallTimeout)
}

// startCtx is callCtx for creating and starting containers.
func (r *Runtime) startCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx = namespaces.WithNamespace(ctx, r.opts.Namespace)
	return context.WithTimeout(ctx, max(r.opts.StartTimeout, r.opts.CallTimeout))
}

// outOfTime reports whether err is a call's running out of time or being
// cancelled (ctx's, or containerd's answer DeadlineExceeded, which may
// come just before ctx is marked done), not an answer about the object.
func outOfTime(ctx context.Context, err error) bool {
	err = convertErr(err)
	return ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// convertErr maps containerd's error classes onto ours, keeping the cause.
func convertErr(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		err = errdefs.FromGRPC(err)
	}
	switch {
	case errdefs.IsNotFound(err):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case errdefs.IsFailedPrecondition(err), errdefs.IsAlreadyExists(err):
		return fmt.Errorf("%w: %w", ErrFailedPrecondition, err)
	}
	return err
}

// Version reports the connected containerd's version.
func (r *Runtime) Version(ctx context.Context) (Version, error) {
	ctx, cancel := r.callCtx(ctx)
	defer cancel()
	v, err := r.client.Version(ctx)
	if err != nil {
		return Version{}, fmt.Errorf("runtime: version: %w", convertErr(err))
	}
	return Version{RuntimeName: "containerd", RuntimeVersion: v.Version, Revision: v.Revision}, nil
}

// ListImages lists the images of the namespace, one entry per image config
// (several references to the same image are merged into Names).
func (r *Runtime) ListImages(ctx context.Context) ([]Image, error) {
	ctx, cancel := r.callCtx(ctx)
	defer cancel()
	imgs, err := r.client.ImageService().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("runtime: list images: %w", convertErr(err))
	}
	return r.imagesFrom(ctx, imgs)
}

func (r *Runtime) imagesFrom(ctx context.Context, imgs []images.Image) ([]Image, error) {
	byID := map[string]*Image{}
	var order []string
	for _, img := range imgs {
		facts, err := r.factsOf(ctx, img)
		if err != nil {
			if outOfTime(ctx, err) {
				// Says nothing about the image: a list without it
				// would report it absent (pulled again, or refused
				// with pull policy Never; images.go's imageInfo).
				return nil, fmt.Errorf("runtime: image %s: config: %w", img.Name, convertErr(err))
			}
			// An image whose content for this platform is missing is not
			// usable here; skip it rather than failing the whole list.
			r.opts.Logger.Debug("skipping image without usable config", "image", img.Name, "err", err)
			continue
		}
		id := facts.id
		e, ok := byID[id]
		if !ok {
			e = &Image{ID: id, Size: facts.size}
			byID[id] = e
			order = append(order, id)
		}
		e.Names = append(e.Names, img.Name)
		e.Pinned = e.Pinned || img.Labels[LabelPinned] == "pinned"
	}
	out := make([]Image, 0, len(order))
	for _, id := range order {
		sort.Strings(byID[id].Names)
		out = append(out, *byID[id])
	}
	return out, nil
}

// ImportImage imports an OCI or Docker image archive (as written by
// "ctr images export" or "docker save") and unpacks it for the configured
// snapshotter. It returns the imported images.
func (r *Runtime) ImportImage(ctx context.Context, archive io.Reader) ([]Image, error) {
	ctx, cancel := r.callCtx(ctx)
	defer cancel()
	imgs, err := r.client.Import(ctx, archive, containerd.WithImportPlatform(platforms.Default()))
	if err != nil {
		return nil, fmt.Errorf("runtime: import image: %w", convertErr(err))
	}
	for _, img := range imgs {
		i := containerd.NewImageWithPlatform(r.client, img, platforms.Default())
		if err := i.Unpack(ctx, r.opts.Snapshotter); err != nil {
			return nil, fmt.Errorf("runtime: unpack image %s: %w", img.Name, convertErr(err))
		}
	}
	return r.imagesFrom(ctx, imgs)
}
