package runtime

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/containerd"
	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/cio"
	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/oci"
	"github.com/containerd/containerd/platforms"
	"github.com/nodeagent/nodeagent/crilog"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"k8s.io/apimachinery/pkg/types"
)

// podFilter selects the containers that carry a pod UID label.
var podFilter = `labels."` + LabelPodUID + `"`

// ListContainers lists every pod container of the namespace with its state.
// It costs two calls to containerd whatever the number of containers, and
// one or two more for each started container the task list leaves out
// without a recorded exit (taskless); one whose state cannot be told now
// is listed Undetermined.
func (r *Runtime) ListContainers(ctx context.Context) ([]Container, error) {
	ctx, cancel := r.callCtx(ctx)
	defer cancel()
	// Tasks first: a container created between the two calls then shows as
	// created (its task is not in the list), never as a task without a
	// container.
	tl, err := r.client.TaskService().List(ctx, &tasksapi.ListTasksRequest{})
	if err != nil {
		return nil, fmt.Errorf("runtime: list tasks: %w", convertErr(err))
	}
	cl, err := r.client.ContainerService().List(ctx, podFilter)
	if err != nil {
		return nil, fmt.Errorf("runtime: list containers: %w", convertErr(err))
	}
	tasks := make(map[string]*tasktypes.Process, len(tl.Tasks))
	for _, t := range tl.Tasks {
		tasks[t.ID] = t
	}
	out := make([]Container, 0, len(cl))
	keep := make(map[string]bool, len(cl))
	for i := range cl {
		keep[cl[i].ID] = true
		t := tasks[cl[i].ID]
		if t == nil && startedWithoutExit(cl[i].Labels) {
			c, err := r.taskless(ctx, &cl[i])
			if errors.Is(err, ErrNotFound) {
				continue // removed since the listing
			}
			if err != nil {
				c = r.containerFrom(ctx, &cl[i], &tasktypes.Process{Status: tasktypes.Status_UNKNOWN})
				c.Undetermined = true
				r.opts.Logger.Debug("container state undetermined at this listing", "containerID", c.ID, "err", err)
			}
			out = append(out, c)
			continue
		}
		out = append(out, r.containerFrom(ctx, &cl[i], t))
	}
	r.specs.forget(keep)
	for _, m := range []*sync.Map{&r.stopping, &r.oomLogged} {
		m.Range(func(id, _ any) bool {
			if !keep[id.(string)] {
				m.Delete(id)
			}
			return true
		})
	}
	return out, nil
}

// ListPods lists pod containers grouped by pod.
func (r *Runtime) ListPods(ctx context.Context) ([]Pod, error) {
	cs, err := r.ListContainers(ctx)
	if err != nil {
		return nil, err
	}
	return GroupPods(cs), nil
}

// InspectContainer returns one container's state. A container that does not
// exist, or is not a pod container, yields an error matching ErrNotFound.
func (r *Runtime) InspectContainer(ctx context.Context, id string) (Container, error) {
	ctx, cancel := r.callCtx(ctx)
	defer cancel()
	// The task first, as ListContainers: StartContainer records the start
	// time in the labels before it starts the task, so labels read after a
	// running task always carry it (read the other way round, a container
	// starting in between showed as running with no start time).
	var proc *tasktypes.Process
	resp, err := r.client.TaskService().Get(ctx, &tasksapi.GetRequest{ContainerID: id})
	switch err = convertErr(err); {
	case err == nil:
		proc = resp.Process
	case errors.Is(err, ErrNotFound):
	default:
		return Container{}, fmt.Errorf("runtime: inspect task %s: %w", id, err)
	}
	c, err := r.client.ContainerService().Get(ctx, id)
	if err != nil {
		return Container{}, fmt.Errorf("runtime: inspect container %s: %w", id, convertErr(err))
	}
	if c.Labels[LabelPodUID] == "" {
		return Container{}, fmt.Errorf("runtime: inspect container %s: %w: not a pod container", id, ErrNotFound)
	}
	var out Container
	if proc == nil && startedWithoutExit(c.Labels) {
		if out, err = r.taskless(ctx, &c); err != nil {
			return Container{}, err
		}
	} else {
		out = r.containerFrom(ctx, &c, proc)
	}
	if out.Undetermined {
		return Container{}, fmt.Errorf("runtime: inspect task %s: containerd could not tell its state (status unknown)", id)
	}
	return out, nil
}

// startedWithoutExit reports whether a container's labels say it was
// started and no exit was recorded for it.
func startedWithoutExit(l map[string]string) bool {
	return l[labelStartedAt] != "" && l[labelExitCode] == ""
}

// taskless is the state of a started container whose task a read did not
// show and whose exit no recorder labelled (startedWithoutExit). That is
// not an exit. containerd 2.x leaves out of its task list a task whose
// shim does not answer its state query within containerd's state timeout
// (2s), as a shim does while it starts the task (it holds the process's
// lock through runc start; the cgroup v2 guest under emulation saw it),
// and a task created, and its start recorded (StartContainer), between a
// read of the tasks and the read of the labels is in neither. Reported as
// exited with an unknown code (-1), such a container failed its
// restartPolicy Never pod, whose phase never leaves Failed, although its
// process exited 0 (docs/pods.md). Kubelet reads a container's state from
// the runtime and does not guess while the runtime can still be asked:
// the task is asked for again, after the labels were read; a task gone by
// then is looked for in the labels again (its exit is recorded before a
// task is deleted); only a task gone without any record is an unknown
// exit. An error means the runtime could not tell now.
func (r *Runtime) taskless(ctx context.Context, c *containers.Container) (Container, error) {
	resp, err := r.client.TaskService().Get(ctx, &tasksapi.GetRequest{ContainerID: c.ID})
	switch err = convertErr(err); {
	case err == nil:
		return r.containerFrom(ctx, c, resp.Process), nil
	case !errors.Is(err, ErrNotFound):
		return Container{}, fmt.Errorf("runtime: inspect task %s: %w", c.ID, err)
	}
	fresh, err := r.client.ContainerService().Get(ctx, c.ID)
	if err != nil {
		return Container{}, fmt.Errorf("runtime: inspect container %s: %w", c.ID, convertErr(err))
	}
	return r.containerFrom(ctx, &fresh, nil), nil
}

func (r *Runtime) containerFrom(ctx context.Context, c *containers.Container, t *tasktypes.Process) Container {
	l := c.Labels
	facts := r.specs.of(c.ID, c.Spec)
	out := Container{
		ID: c.ID,
		Pod: PodRef{
			UID:       types.UID(l[LabelPodUID]),
			Name:      l[LabelPodName],
			Namespace: l[LabelPodNamespace],
		},
		Name:        l[LabelContainerName],
		Image:       c.Image,
		CreatedAt:   c.CreatedAt,
		StartedAt:   parseTime(l[labelStartedAt]),
		LogPath:     l[labelLogPath],
		CgroupsPath: cmp.Or(l[labelCgroupsPath], facts.cgroupsPath),
		User:        facts.user,
		Labels:      l,
	}
	if a, err := strconv.ParseUint(l[LabelContainerAttempt], 10, 32); err == nil {
		out.Attempt = uint32(a)
	}
	oom := l[labelOOMKilled] == "true"
	switch {
	case t == nil && out.StartedAt.IsZero():
		out.State = StateCreated
	case t == nil:
		// Started, then the task was deleted (StopContainer records the
		// exit status in labels before deleting it).
		out.State = StateExited
		out.FinishedAt = parseTime(l[labelFinishedAt])
		out.Reason = ReasonUnknown
		if code, err := strconv.ParseInt(l[labelExitCode], 10, 32); err == nil {
			out.ExitCode = int32(code)
			out.Reason = l[labelReason]
		} else {
			out.ExitCode = -1
		}
	default:
		switch t.Status {
		case tasktypes.Status_CREATED:
			out.State = StateCreated
		case tasktypes.Status_RUNNING, tasktypes.Status_PAUSED, tasktypes.Status_PAUSING:
			out.State = StateRunning
			out.Pid = t.Pid
		case tasktypes.Status_STOPPED:
			out.State = StateExited
			out.ExitCode = int32(t.ExitStatus)
			if t.ExitedAt != nil {
				out.FinishedAt = t.ExitedAt.AsTime()
			}
			out.Reason = exitReason(out.ExitCode, oom)
			// Seen before the exit recorder labelled it (a relist, or the
			// PLEG's cgroup event, can beat containerd's TaskExit to the
			// agent): decided now as markExit will decide, so that no path
			// reports Error for an OOM kill found in memory.events.
			if set, _ := r.inferOOM(ctx, c.ID, l, out.ExitCode); !oom && set[labelOOMKilled] == "true" {
				out.Reason = ReasonOOMKilled
			}
		default:
			// UNKNOWN is what containerd answers when it could not ask
			// the shim (an error other than not found: a loaded host),
			// not a state of the container: ask again.
			out.State, out.Undetermined = StateUnknown, true
		}
	}
	return out
}

func exitReason(code int32, oom bool) string {
	switch {
	case oom:
		return ReasonOOMKilled
	case code == 0:
		return ReasonCompleted
	default:
		return ReasonError
	}
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Validate checks a ContainerSpec and reports every problem at once.
func (s *ContainerSpec) Validate() error {
	var errs []error
	if s.Pod.UID == "" {
		errs = append(errs, errors.New("pod UID is required"))
	}
	if s.Pod.Name == "" || s.Pod.Namespace == "" {
		errs = append(errs, errors.New("pod name and namespace are required"))
	}
	if s.Name == "" {
		errs = append(errs, errors.New("container name is required"))
	}
	if s.Image == "" {
		errs = append(errs, errors.New("image is required"))
	} else if _, err := NormalizeImageRef(s.Image); err != nil {
		errs = append(errs, err)
	}
	if s.NetNSPath != "" {
		if s.HostNetwork {
			errs = append(errs, fmt.Errorf("netNSPath %q and hostNetwork are mutually exclusive", s.NetNSPath))
		}
		if !filepath.IsAbs(s.NetNSPath) {
			errs = append(errs, fmt.Errorf("netNSPath %q must be absolute", s.NetNSPath))
		}
	}
	for i, e := range s.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			errs = append(errs, fmt.Errorf("env[%d] %q is not KEY=VALUE", i, e))
		}
	}
	if s.WorkingDir != "" && !path.IsAbs(s.WorkingDir) {
		errs = append(errs, fmt.Errorf("workingDir %q must be absolute", s.WorkingDir))
	}
	for i, m := range s.Mounts {
		if !filepath.IsAbs(m.HostPath) || !path.IsAbs(m.ContainerPath) {
			errs = append(errs, fmt.Errorf("mounts[%d]: hostPath %q and containerPath %q must be absolute", i, m.HostPath, m.ContainerPath))
		}
		if m.Propagation < PropagationPrivate || m.Propagation > PropagationBidirectional {
			errs = append(errs, fmt.Errorf("mounts[%d]: unknown propagation %v", i, m.Propagation))
		}
	}
	for i, d := range s.Devices {
		if !filepath.IsAbs(d.HostPath) || !path.IsAbs(d.ContainerPath) {
			errs = append(errs, fmt.Errorf("devices[%d]: hostPath %q and containerPath %q must be absolute", i, d.HostPath, d.ContainerPath))
		}
	}
	if s.LogPath != "" && !filepath.IsAbs(s.LogPath) {
		errs = append(errs, fmt.Errorf("logPath %q must be absolute", s.LogPath))
	}
	if s.CgroupParent != "" && !strings.HasPrefix(s.CgroupParent, "/") && !strings.HasSuffix(s.CgroupParent, ".slice") {
		errs = append(errs, fmt.Errorf("cgroupParent %q must be an absolute cgroupfs path or a systemd slice", s.CgroupParent))
	}
	if err := validateStdio(s); err != nil {
		errs = append(errs, err)
	}
	if err := s.PodNamespaces.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := s.Security.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("security: %w", err))
	}
	if s.UserNamespace != nil {
		if err := s.UserNamespace.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	r := s.Resources
	if r.CPUQuota < 0 || r.MemoryLimitBytes < 0 {
		errs = append(errs, errors.New("resources must not be negative"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidSpec, errors.Join(errs...))
	}
	return nil
}

// newID is 64 hex digits, as containerd's CRI plugin makes them: log
// shippers parse the ID out of /var/log/containers names with
// [a-z0-9]{64} (Fluent Bit's kubernetes filter, fluentd's
// kubernetes_metadata).
func newID() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b)
}

// CreateContainer creates (but does not start) a container and returns its ID.
func (r *Runtime) CreateContainer(ctx context.Context, spec ContainerSpec) (string, error) {
	if err := spec.Validate(); err != nil {
		return "", err
	}
	if spec.NetNSPath != "" {
		if _, err := os.Stat(spec.NetNSPath); err != nil {
			return "", fmt.Errorf("runtime: create container %s/%s %s: network namespace: %w", spec.Pod.Namespace, spec.Pod.Name, spec.Name, err)
		}
	}
	ctx, cancel := r.startCtx(ctx)
	defer cancel()
	rec, err := r.lookupImage(ctx, spec.Image)
	if err != nil {
		return "", fmt.Errorf("runtime: create container %s/%s %s: %w", spec.Pod.Namespace, spec.Pod.Name, spec.Name, err)
	}
	img := containerd.NewImageWithPlatform(r.client, rec, platforms.Default())
	if ok, err := img.IsUnpacked(ctx, r.opts.Snapshotter); err != nil || !ok {
		if err := img.Unpack(ctx, r.opts.Snapshotter); err != nil {
			return "", fmt.Errorf("runtime: unpack image %s: %w", spec.Image, convertErr(err))
		}
	}
	id := newID()
	runtimeType := spec.RuntimeType
	if runtimeType == "" {
		runtimeType = DefaultRuntimeType
	}
	parent := spec.CgroupParent
	if parent == "" {
		parent = path.Join(r.opts.CgroupParent, string(spec.Pod.UID))
	}
	cgroupsPath, err := r.containerCgroupsPath(parent, id)
	if err != nil {
		return "", fmt.Errorf("runtime: create container %s/%s %s: %w", spec.Pod.Namespace, spec.Pod.Name, spec.Name, err)
	}

	labels := map[string]string{}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	labels[LabelPodUID] = string(spec.Pod.UID)
	labels[LabelPodName] = spec.Pod.Name
	labels[LabelPodNamespace] = spec.Pod.Namespace
	labels[LabelContainerName] = spec.Name
	labels[LabelContainerAttempt] = strconv.FormatUint(uint64(spec.Attempt), 10)
	labels[labelCgroupsPath] = cgroupsPath
	if spec.LogPath != "" {
		labels[labelLogPath] = spec.LogPath
	}
	for k, v := range stdioLabels(spec) {
		labels[k] = v
	}

	sopts := []oci.SpecOpts{oci.WithImageConfig(img)}
	// Before the security options: a privileged container's is made
	// writable there.
	sopts = append(sopts, cgroupMountOpts(r.unified, spec.Security.Privileged, spec.Mounts)...)
	switch {
	case len(spec.Command) > 0:
		sopts = append(sopts, oci.WithProcessArgs(append(append([]string{}, spec.Command...), spec.Args...)...))
	case len(spec.Args) > 0:
		sopts = append(sopts, oci.WithImageConfigArgs(img, spec.Args))
	}
	if len(spec.Env) > 0 {
		sopts = append(sopts, oci.WithEnv(spec.Env))
	}
	if spec.WorkingDir != "" {
		sopts = append(sopts, oci.WithProcessCwd(spec.WorkingDir))
	}
	if len(spec.Mounts) > 0 {
		ms, rootfsPropagation, err := ociMounts(spec.Mounts, lookupMount)
		if err != nil {
			return "", fmt.Errorf("runtime: create container %s/%s %s: %w", spec.Pod.Namespace, spec.Pod.Name, spec.Name, err)
		}
		if spec.UserNamespace != nil {
			idmapMounts(ms, spec.UserNamespace)
		}
		sopts = append(sopts, oci.WithMounts(ms))
		if rootfsPropagation != "" {
			sopts = append(sopts, withRootfsPropagation(rootfsPropagation))
		}
	}
	hostname := spec.Hostname
	if hostname == "" {
		hostname = spec.Pod.Name
	}
	switch {
	case spec.HostNetwork:
		sopts = append(sopts, oci.WithHostNamespace(specs.NetworkNamespace))
		// The host's files, unless the agent mounts the pod's own.
		if !mountsAt(spec.Mounts, "/etc/hosts") {
			sopts = append(sopts, oci.WithHostHostsFile)
		}
		if !mountsAt(spec.Mounts, "/etc/resolv.conf") {
			sopts = append(sopts, oci.WithHostResolvconf)
		}
	case spec.NetNSPath != "":
		sopts = append(sopts, oci.WithHostname(hostname),
			oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: spec.NetNSPath}))
	default:
		sopts = append(sopts, oci.WithHostname(hostname))
	}
	sopts = append(sopts, podNamespaceOpts(spec.PodNamespaces)...)
	sopts = append(sopts, cgroupNamespaceOpts(r.unified, spec.Security.Privileged)...)
	sopts = append(sopts, resourceSpecOpts(spec.Resources, r.unified)...)
	sopts = append(sopts, oomGroupOpts(r.unified, r.opts.SingleProcessOOMKill)...)
	sopts = append(sopts, oci.WithCgroup(cgroupsPath))
	if spec.OOMScoreAdj != nil {
		sopts = append(sopts, withOOMScoreAdj(*spec.OOMScoreAdj))
	}
	if spec.TTY {
		sopts = append(sopts, oci.WithTTY)
	}
	sopts = append(sopts, securitySpecOpts(spec.Security, allCapabilities())...)
	if spec.Security.needsUser() {
		sopts = append(sopts, withUser(spec.Security))
	}
	for _, d := range spec.Devices {
		sopts = append(sopts, oci.WithDevices(d.HostPath, d.ContainerPath, d.Permissions))
	}
	if len(spec.Annotations) > 0 {
		sopts = append(sopts, oci.WithAnnotations(spec.Annotations))
	}
	snapshot := containerd.WithNewSnapshot(id, img)
	if u := spec.UserNamespace; u != nil {
		sopts = append(sopts, userNSSpecOpts(u))
		snapshot = remappedSnapshot(id, img, u)
		uid, gid, _ := u.hostRoot()
		labels[labelUserNSRoot] = fmt.Sprintf("%d:%d", uid, gid)
	}
	// Last, as containerd's CRI plugin applies them: a CDI spec's edits
	// may add to what the pod spec and the device plugin gave.
	sopts = append(sopts, r.cdi.withCDIDevices(spec.CDIDevices))

	_, err = r.client.NewContainer(ctx, id,
		containerd.WithImage(img),
		containerd.WithSnapshotter(r.opts.Snapshotter),
		snapshot,
		containerd.WithRuntime(runtimeType, r.runtimeOptions(runtimeType)),
		containerd.WithNewSpec(sopts...),
		containerd.WithContainerLabels(labels),
	)
	if err != nil {
		return "", fmt.Errorf("runtime: create container %s/%s %s: %w", spec.Pod.Namespace, spec.Pod.Name, spec.Name, convertErr(err))
	}
	return id, nil
}

// cgroupNamespaceOpts gives the container a private cgroup namespace on a
// unified cgroup v2 host unless it is privileged, as containerd's CRI
// plugin does for kubelet (internal/cri/server/container_create.go:
// "cgroupns is used for hiding /sys/fs/cgroup from containers", not on
// cgroup v1 nor for privileged containers, KEP 2254's cgroup namespace):
// the container sees its own cgroup as / in /proc/self/cgroup and in its
// /sys/fs/cgroup. The agent reads containers' cgroups from the host's
// namespace, where the paths stay absolute.
func cgroupNamespaceOpts(unified, privileged bool) []oci.SpecOpts {
	if !unified || privileged {
		return nil
	}
	return []oci.SpecOpts{oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.CgroupNamespace})}
}

// resourceSpecOpts sets the container's CPU and memory limits in the OCI
// spec, as containerd's CRI plugin does from kubelet's
// LinuxContainerResources. Like it, it sets no pids limit
// (linux.resources.pids): the CRI has no such field, so a kubelet
// container's only pids limit is its pod's (podPidsLimit) and, with the
// systemd cgroup driver, the TasksMax systemd gives every scope runc
// starts without one (its DefaultTasksMax; docs/vm.md).
func resourceSpecOpts(res Resources, unified bool) []oci.SpecOpts {
	var sopts []oci.SpecOpts
	if res.CPUShares > 0 {
		sopts = append(sopts, oci.WithCPUShares(res.CPUShares))
	}
	if res.CPUQuota > 0 {
		period := res.CPUPeriod
		if period == 0 {
			period = 100000
		}
		sopts = append(sopts, oci.WithCPUCFS(res.CPUQuota, period))
	}
	if res.MemoryLimitBytes > 0 {
		sopts = append(sopts, oci.WithMemoryLimit(uint64(res.MemoryLimitBytes)))
	}
	if res.CPUSetCPUs != "" {
		sopts = append(sopts, oci.WithCPUs(res.CPUSetCPUs))
	}
	if res.SwapMax != nil {
		sopts = append(sopts, func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
			if s.Linux == nil {
				s.Linux = &specs.Linux{}
			}
			if s.Linux.Resources == nil {
				s.Linux.Resources = &specs.LinuxResources{}
			}
			applySwap(s.Linux.Resources, res, unified)
			return nil
		})
	}
	return sopts
}

// applySwap sets res.SwapMax in lr as kubelet has containerd set it:
// cgroup v2 memory.swap.max through the unified map; on v1 only "no swap"
// is expressible, as memory+swap equal to the memory limit (nothing
// without a memory limit).
func applySwap(lr *specs.LinuxResources, res Resources, unified bool) {
	if res.SwapMax == nil {
		return
	}
	if unified {
		if lr.Unified == nil {
			lr.Unified = map[string]string{}
		}
		lr.Unified["memory.swap.max"] = strconv.FormatInt(*res.SwapMax, 10)
		return
	}
	if *res.SwapMax == 0 && res.MemoryLimitBytes > 0 {
		if lr.Memory == nil {
			lr.Memory = &specs.LinuxMemory{}
		}
		sw := res.MemoryLimitBytes
		lr.Memory.Swap = &sw
	}
}

// StartContainer starts a created container. A container runs at most once:
// starting it again fails with ErrFailedPrecondition (create a new attempt).
func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	ctx, cancel := r.startCtx(ctx)
	defer cancel()
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return fmt.Errorf("runtime: start %s: %w", id, convertErr(err))
	}
	labels, err := c.Labels(ctx)
	if err != nil {
		return fmt.Errorf("runtime: start %s: %w", id, convertErr(err))
	}
	if labels[labelStartedAt] != "" {
		return fmt.Errorf("runtime: start %s: %w: container already started", id, ErrFailedPrecondition)
	}
	creator := cio.NullIO
	if lp := labels[labelLogPath]; lp != "" {
		if err := os.MkdirAll(filepath.Dir(lp), 0o755); err != nil {
			return fmt.Errorf("runtime: start %s: log directory: %w", id, err)
		}
		creator = cio.LogFile(lp)
		if r.opts.ContainerLogger != "" {
			creator = cio.BinaryIO(r.opts.ContainerLogger, crilog.LoggerArgs(lp, r.opts.LogRotation))
		}
	}
	if labels[labelStdioDir] != "" {
		sc, done, err := r.stdioCreator(id, labels)
		if err != nil {
			return fmt.Errorf("runtime: start %s: stdio: %w", id, err)
		}
		defer done()
		creator = sc
	}
	var topts []containerd.NewTaskOpts
	if owner := labels[labelUserNSRoot]; owner != "" {
		var uid, gid uint32
		if _, err := fmt.Sscanf(owner, "%d:%d", &uid, &gid); err != nil {
			return fmt.Errorf("runtime: start %s: label %s=%q: %w", id, labelUserNSRoot, owner, err)
		}
		info, err := c.Info(ctx, containerd.WithoutRefreshedMetadata)
		if err != nil {
			return fmt.Errorf("runtime: start %s: %w", id, convertErr(err))
		}
		topts = append(topts, withIOOwner(r.runtimeOptions(info.Runtime.Name), uid, gid))
	}
	task, err := c.NewTask(ctx, creator, topts...)
	if err != nil {
		return fmt.Errorf("runtime: start %s: create task: %w", id, convertErr(err))
	}
	// Record the start before the process runs so that an observer never
	// sees a started container without its start time.
	// With it, the pod cgroup's OOM kill count so far: an exit by SIGKILL
	// is an OOM kill only if the count rose since (oomkill.go).
	set := map[string]string{labelStartedAt: formatTime(time.Now())}
	for k, v := range r.startOOMLabels(labels) {
		set[k] = v
	}
	if _, err := c.SetLabels(ctx, set); err != nil {
		_, _ = task.Delete(ctx, containerd.WithProcessKill)
		return fmt.Errorf("runtime: start %s: record start: %w", id, convertErr(err))
	}
	if err := task.Start(ctx); err != nil {
		_, _ = task.Delete(ctx, containerd.WithProcessKill)
		return fmt.Errorf("runtime: start %s: %w", id, convertErr(err))
	}
	r.linkLog(id, labels)
	return nil
}

// StopContainer sends SIGTERM to the container's processes, waits up to
// grace for them to exit, then SIGKILLs them. It records the exit status in
// the container's labels and deletes the task (freeing its shim). Stopping a
// container that is not running is not an error.
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	if grace < 0 {
		grace = 0
	}
	ctx = namespaces.WithNamespace(ctx, r.opts.Namespace)
	ctx, cancel := context.WithTimeout(ctx, 2*r.opts.CallTimeout+grace)
	defer cancel()
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return fmt.Errorf("runtime: stop %s: %w", id, convertErr(err))
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		if errors.Is(convertErr(err), ErrNotFound) {
			return nil
		}
		return fmt.Errorf("runtime: stop %s: %w", id, convertErr(err))
	}
	statusC, err := task.Wait(ctx)
	if err != nil {
		return fmt.Errorf("runtime: stop %s: wait: %w", id, convertErr(err))
	}
	st, err := task.Status(ctx)
	if err != nil {
		return fmt.Errorf("runtime: stop %s: %w", id, convertErr(err))
	}
	var exit containerd.ExitStatus
	exitedBefore := st.Status == containerd.Stopped
	if !exitedBefore {
		// Its exit by SIGKILL from here on is the agent's doing, not the
		// kernel's OOM killer (oomkill.go); forgotten when it is removed.
		r.stopping.Store(id, struct{}{})
		if st.Status == containerd.Created {
			// Never started: nothing to signal, delete below kills it.
			_, err := task.Delete(ctx, containerd.WithProcessKill)
			return convertErrf(err, "runtime: stop %s: delete task", id)
		}
		if err := task.Kill(ctx, syscall.SIGTERM, containerd.WithKillAll); err != nil && !errors.Is(convertErr(err), ErrNotFound) {
			return fmt.Errorf("runtime: stop %s: SIGTERM: %w", id, convertErr(err))
		}
		select {
		case exit = <-statusC:
		case <-r.opts.Clock.After(grace):
			if err := task.Kill(ctx, syscall.SIGKILL, containerd.WithKillAll); err != nil && !errors.Is(convertErr(err), ErrNotFound) {
				return fmt.Errorf("runtime: stop %s: SIGKILL: %w", id, convertErr(err))
			}
			// And to the init process itself, as kubelet's runtime does: runc
			// finds "all" processes in the container's devices cgroup, and
			// on cgroup v1 with the systemd driver systemd can move them out
			// of their scope's (into the pod slice's), so that the signal
			// above reaches none. Killing init takes the container's PID
			// namespace with it. (Already gone: not found, ignored.)
			if err := task.Kill(ctx, syscall.SIGKILL); err != nil && !errors.Is(convertErr(err), ErrNotFound) {
				return fmt.Errorf("runtime: stop %s: SIGKILL init: %w", id, convertErr(err))
			}
			select {
			case exit = <-statusC:
			case <-ctx.Done():
				return fmt.Errorf("runtime: stop %s: waiting for exit after SIGKILL: %w", id, ctx.Err())
			}
		case <-ctx.Done():
			return fmt.Errorf("runtime: stop %s: %w", id, ctx.Err())
		}
	} else {
		exit = *containerd.NewExitStatus(st.ExitStatus, st.ExitTime, nil)
	}
	if exit.Error() != nil {
		return fmt.Errorf("runtime: stop %s: %w", id, convertErr(exit.Error()))
	}
	// An exit that came before the stop (the pod worker releases an
	// exited container's task this way, and may get here before
	// containerd's TaskExit reached markExit) is decided as markExit
	// decides it: a SIGKILL may be an OOM kill whose TaskOOM was lost, and
	// once the task is deleted and the pod cgroup released, nothing can
	// tell any more.
	var extra map[string]string
	labels, err := c.Labels(ctx)
	if err != nil {
		return fmt.Errorf("runtime: stop %s: %w", id, convertErr(err))
	}
	if exitedBefore {
		extra = r.decideOOM(ctx, id, labels, int32(exit.ExitCode()))
	}
	if err := r.recordExitWith(ctx, c, labels, int32(exit.ExitCode()), exit.ExitTime(), extra); err != nil {
		return err
	}
	if _, err := task.Delete(ctx); err != nil && !errors.Is(convertErr(err), ErrNotFound) {
		return fmt.Errorf("runtime: stop %s: delete task: %w", id, convertErr(err))
	}
	return nil
}

func convertErrf(err error, format string, args ...any) error {
	if err == nil || errors.Is(convertErr(err), ErrNotFound) {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, convertErr(err))...)
}

// recordExit stores an exit status in the container's labels; labels are its
// current labels, fetched when nil.
func (r *Runtime) recordExit(ctx context.Context, c containerd.Container, labels map[string]string, code int32, at time.Time) error {
	return r.recordExitWith(ctx, c, labels, code, at, nil)
}

// recordExitWith is recordExit that also sets the labels extra (an OOM
// kill found in the cgroups: labelOOMKilled "true" makes the reason
// OOMKilled).
func (r *Runtime) recordExitWith(ctx context.Context, c containerd.Container, labels map[string]string, code int32, at time.Time, extra map[string]string) error {
	// A SIGKILL on cgroup v2 not found to be an OOM kill here may have
	// been found one by the other recorder (StopContainer or markExit)
	// since labels were read, when the cgroups could still tell: read
	// them again rather than overwrite OOMKilled with Error.
	if labels == nil || (r.unified && code == sigkillExitCode && extra[labelOOMKilled] != "true") {
		var err error
		if labels, err = c.Labels(ctx); err != nil {
			return fmt.Errorf("runtime: record exit of %s: %w", c.ID(), convertErr(err))
		}
	}
	if labels[labelExitCode] == strconv.Itoa(int(code)) && labels[labelFinishedAt] == formatTime(at) {
		return nil // already recorded (by the event watcher and a subscriber)
	}
	set := map[string]string{
		labelExitCode:   strconv.Itoa(int(code)),
		labelFinishedAt: formatTime(at),
		labelReason:     exitReason(code, labels[labelOOMKilled] == "true" || extra[labelOOMKilled] == "true"),
	}
	for k, v := range extra {
		set[k] = v
	}
	_, err := c.SetLabels(ctx, set)
	if err != nil {
		return fmt.Errorf("runtime: record exit of %s: %w", c.ID(), convertErr(err))
	}
	return nil
}

// RemoveContainer removes a container, killing its processes if they still
// run, and its snapshot. Removing a container that does not exist is not an
// error.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	ctx, cancel := r.callCtx(ctx)
	defer cancel()
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		if errors.Is(convertErr(err), ErrNotFound) {
			return nil
		}
		return fmt.Errorf("runtime: remove %s: %w", id, convertErr(err))
	}
	if task, err := c.Task(ctx, nil); err == nil {
		r.stopping.Store(id, struct{}{}) // its SIGKILL is the agent's
		if _, err := task.Delete(ctx, containerd.WithProcessKill); err != nil && !errors.Is(convertErr(err), ErrNotFound) {
			return fmt.Errorf("runtime: remove %s: delete task: %w", id, convertErr(err))
		}
	} else if !errors.Is(convertErr(err), ErrNotFound) {
		return fmt.Errorf("runtime: remove %s: %w", id, convertErr(err))
	}
	labels, _ := c.Labels(ctx)
	// The symlink goes first (as in kubelet): a removal that fails after
	// it is retried, one that stopped before it would leave it dangling.
	if err := r.unlinkLog(id, labels); err != nil {
		return fmt.Errorf("runtime: remove %s: log symlink: %w", id, err)
	}
	if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errors.Is(convertErr(err), ErrNotFound) {
		return fmt.Errorf("runtime: remove %s: %w", id, convertErr(err))
	}
	removeStdio(labels, id)
	r.removeContainerCgroup(labels[labelCgroupsPath])
	r.stopping.Delete(id)
	return nil
}

// mountsAt reports whether a mount's target is p.
func mountsAt(ms []Mount, p string) bool {
	for _, m := range ms {
		if path.Clean(m.ContainerPath) == p {
			return true
		}
	}
	return false
}
