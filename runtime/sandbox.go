package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/containerd/containerd"
	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"k8s.io/apimachinery/pkg/types"
)

// PodNamespaces are the namespaces a container shares with the other
// containers of its pod, as a CRI runtime's containers share their
// sandbox's (NamespaceOption POD): files that hold each namespace (see
// internal/netns CreatePod). An empty path keeps the container's own
// namespace (or the host's, with Security.HostIPC or HostNetwork).
type PodNamespaces struct {
	// IPCPath is the pod's IPC namespace; ShmPath the directory mounted
	// as the container's /dev/shm (the pod's tmpfs), with IPCPath.
	IPCPath, ShmPath string
	// UTSPath is the pod's UTS namespace (its hostname).
	UTSPath string
}

func (n PodNamespaces) validate() error {
	var errs []error
	for _, p := range []struct{ name, path string }{{"ipcPath", n.IPCPath}, {"shmPath", n.ShmPath}, {"utsPath", n.UTSPath}} {
		if p.path != "" && !filepath.IsAbs(p.path) {
			errs = append(errs, fmt.Errorf("podNamespaces.%s %q must be absolute", p.name, p.path))
		}
	}
	if n.ShmPath != "" && n.IPCPath == "" {
		errs = append(errs, errors.New("podNamespaces.shmPath needs ipcPath"))
	}
	return errors.Join(errs...)
}

// podNamespaceOpts joins the pod's namespaces. Security options applied
// later (hostIPC) override them.
func podNamespaceOpts(n PodNamespaces) []oci.SpecOpts {
	var opts []oci.SpecOpts
	if n.IPCPath != "" {
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.IPCNamespace, Path: n.IPCPath}))
	}
	if n.ShmPath != "" {
		opts = append(opts, withPodShm(n.ShmPath))
	}
	if n.UTSPath != "" {
		// The pod's namespace has the pod's hostname: a container must
		// not set it again (runc would, for every container of the pod).
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.UTSNamespace, Path: n.UTSPath}), oci.WithHostname(""))
	}
	return opts
}

// withPodShm replaces the default /dev/shm (a tmpfs of the container's
// own) by a bind mount of the pod's, as containerd's CRI does with the
// sandbox's shm. A volume the pod mounts on /dev/shm comes later in the
// mount list and still wins.
func withPodShm(dir string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, sp *specs.Spec) error {
		m := specs.Mount{Destination: "/dev/shm", Type: "bind", Source: dir, Options: []string{"rbind", "rw", "nosuid", "nodev", "noexec"}}
		for i := range sp.Mounts {
			if sp.Mounts[i].Destination == "/dev/shm" {
				sp.Mounts[i] = m
				return nil
			}
		}
		sp.Mounts = append(sp.Mounts, m)
		return nil
	}
}

// Labels of pause containers. They carry no LabelPodUID, so that
// ListContainers (and through it the PLEG, pod status and orphan
// cleanup of app containers) never sees them.
const (
	LabelPausePodUID       = labelPrefix + "pause.pod-uid"
	labelPausePodName      = labelPrefix + "pause.pod-name"
	labelPausePodNamespace = labelPrefix + "pause.pod-namespace"
)

// pauseFilter selects pause containers.
var pauseFilter = `labels."` + LabelPausePodUID + `"`

// PauseSpec is what CreatePause needs for a pod's pause container.
type PauseSpec struct {
	Pod PodRef
	// RootfsDir is the pause's read-only rootfs, shared by every pause:
	// CreatePause lays it out (mount points and the binary's file).
	RootfsDir string
	// CgroupParent, NetNSPath, HostNetwork and PodNamespaces as in
	// ContainerSpec: the pause runs where the pod's containers run.
	CgroupParent  string
	NetNSPath     string
	HostNetwork   bool
	HostIPC       bool
	PodNamespaces PodNamespaces
}

// Pause is a pod's pause container as found.
type Pause struct {
	ID    string
	Pod   PodRef
	State State  // running, or not (created, exited, unknown)
	Pid   uint32 // host PID of the pause process while running
	// Exit is how a stopped pause ended ("exit code 2 at <time>"; "" when
	// it runs or its task is gone), for the log of its removal.
	Exit string
}

// pauseOOMScoreAdj is kubelet's oom_score_adj for sandboxes (qos
// PodInfraOOMAdj): the pause goes last.
const pauseOOMScoreAdj = -998

// CreatePause creates and starts the pause process of a pod (PID 1 of
// the pod's PID namespace): Options.ContainerLogger's pause mode, from a
// read-only rootfs that holds only that static binary, without
// capabilities, in the pod's cgroup, network, IPC and UTS namespaces.
// It returns the container's ID.
func (r *Runtime) CreatePause(ctx context.Context, spec PauseSpec) (string, error) {
	bin := r.opts.ContainerLogger
	if bin == "" {
		return "", fmt.Errorf("runtime: create pause of %s/%s: %w: no pause binary (Options.ContainerLogger)", spec.Pod.Namespace, spec.Pod.Name, ErrFailedPrecondition)
	}
	if err := spec.validate(); err != nil {
		return "", err
	}
	if err := layoutPauseRootfs(spec.RootfsDir); err != nil {
		return "", fmt.Errorf("runtime: pause rootfs: %w", err)
	}
	parent := spec.CgroupParent
	if parent == "" {
		parent = filepath.Join(r.opts.CgroupParent, string(spec.Pod.UID))
	}
	id := newID()
	cgroupsPath, err := r.containerCgroupsPath(parent, id)
	if err != nil {
		return "", fmt.Errorf("runtime: create pause of %s/%s: %w", spec.Pod.Namespace, spec.Pod.Name, err)
	}
	sctx, cancel := r.startCtx(ctx)
	defer cancel()
	_, err = r.client.NewContainer(sctx, id,
		containerd.WithRuntime(DefaultRuntimeType, r.runtimeOptions(DefaultRuntimeType)),
		containerd.WithNewSpec(pauseSpecOpts(spec, bin, cgroupsPath)...),
		containerd.WithContainerLabels(map[string]string{
			LabelPausePodUID:       string(spec.Pod.UID),
			labelPausePodName:      spec.Pod.Name,
			labelPausePodNamespace: spec.Pod.Namespace,
			labelCgroupsPath:       cgroupsPath,
		}),
	)
	if err != nil {
		return "", fmt.Errorf("runtime: create pause of %s/%s: %w", spec.Pod.Namespace, spec.Pod.Name, convertErr(err))
	}
	if err := r.StartContainer(ctx, id); err != nil {
		_ = r.RemoveContainer(ctx, id)
		return "", err
	}
	return id, nil
}

func (s PauseSpec) validate() error {
	var errs []error
	if s.Pod.UID == "" {
		errs = append(errs, errors.New("pod UID is required"))
	}
	if !filepath.IsAbs(s.RootfsDir) {
		errs = append(errs, fmt.Errorf("rootfsDir %q must be absolute", s.RootfsDir))
	}
	if s.NetNSPath != "" && (s.HostNetwork || !filepath.IsAbs(s.NetNSPath)) {
		errs = append(errs, fmt.Errorf("netNSPath %q must be absolute and not with hostNetwork", s.NetNSPath))
	}
	if err := s.PodNamespaces.validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: pause: %w", ErrInvalidSpec, errors.Join(errs...))
	}
	return nil
}

// pauseSpecOpts is the pause container's OCI spec (over containerd's
// default one, which gives it a PID namespace of its own).
func pauseSpecOpts(s PauseSpec, bin, cgroupsPath string) []oci.SpecOpts {
	opts := []oci.SpecOpts{
		oci.WithRootFSPath(s.RootfsDir),
		oci.WithRootFSReadonly(),
		oci.WithProcessArgs(pauseBinary, pauseCommand),
		oci.WithProcessCwd("/"),
		oci.WithMounts([]specs.Mount{{Destination: pauseBinary, Type: "bind", Source: bin, Options: []string{"rbind", "ro", "nosuid", "nodev"}}}),
		oci.WithCapabilities(nil),
		oci.WithNoNewPrivileges,
		oci.WithCgroup(cgroupsPath),
		withOOMScoreAdj(pauseOOMScoreAdj),
	}
	switch {
	case s.HostNetwork:
		opts = append(opts, oci.WithHostNamespace(specs.NetworkNamespace), oci.WithHostNamespace(specs.UTSNamespace))
	case s.NetNSPath != "":
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: s.NetNSPath}))
	}
	if s.HostIPC {
		opts = append(opts, oci.WithHostNamespace(specs.IPCNamespace))
	}
	ns := s.PodNamespaces
	ns.ShmPath = "" // the pause uses no /dev/shm
	return append(opts, podNamespaceOpts(ns)...)
}

const (
	pauseBinary  = "/pause"
	pauseCommand = "pause" // internal/pause.Command
)

// layoutPauseRootfs makes the pause rootfs's mount points (runc cannot
// make them in a read-only rootfs).
func layoutPauseRootfs(dir string) error {
	for _, d := range []string{"proc", "dev", "sys", "run"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, pauseBinary), os.O_RDONLY|os.O_CREATE, 0o555)
	if err != nil {
		return err
	}
	return f.Close()
}

// ListPauses lists the pause containers of pod uid ("": of every pod).
func (r *Runtime) ListPauses(ctx context.Context, uid types.UID) ([]Pause, error) {
	ctx, cancel := r.callCtx(ctx)
	defer cancel()
	filter := pauseFilter
	if uid != "" {
		filter += `==` + strconv.Quote(string(uid))
	}
	cl, err := r.client.ContainerService().List(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("runtime: list pause containers: %w", convertErr(err))
	}
	out := make([]Pause, 0, len(cl))
	for _, c := range cl {
		p := Pause{ID: c.ID, State: StateExited, Pod: PodRef{
			UID:       types.UID(c.Labels[LabelPausePodUID]),
			Name:      c.Labels[labelPausePodName],
			Namespace: c.Labels[labelPausePodNamespace],
		}}
		resp, err := r.client.TaskService().Get(ctx, &tasksapi.GetRequest{ContainerID: c.ID})
		switch err = convertErr(err); {
		case err == nil:
			p.State = pauseState(resp.Process.Status)
			if p.State == StateRunning {
				p.Pid = resp.Process.Pid
			}
			if resp.Process.Status == tasktypes.Status_STOPPED {
				p.Exit = fmt.Sprintf("exit code %d at %s", resp.Process.ExitStatus, resp.Process.ExitedAt.AsTime().Format(time.RFC3339Nano))
			}
		case errors.Is(err, ErrNotFound):
		default:
			return nil, fmt.Errorf("runtime: pause %s: %w", c.ID, err)
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Pause) int { return cmpState(a, b) })
	return out, nil
}

// pauseState is a pause's state from its task's status. UNKNOWN is what
// containerd answers when the shim did not answer in time (a loaded host):
// the pause may well run, so it is not taken for dead (whoever sees it dead
// removes it, killing the pod's PID namespace with every process in it).
// A task created but not started (the agent died in between) is dead.
func pauseState(s tasktypes.Status) State {
	switch s {
	case tasktypes.Status_RUNNING, tasktypes.Status_PAUSED, tasktypes.Status_PAUSING:
		return StateRunning
	case tasktypes.Status_UNKNOWN:
		return StateUnknown
	}
	return StateExited
}

// cmpState orders running pauses first.
func cmpState(a, b Pause) int {
	switch {
	case a.State == StateRunning && b.State != StateRunning:
		return -1
	case a.State != StateRunning && b.State == StateRunning:
		return 1
	}
	return 0
}
