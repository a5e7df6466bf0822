package pods

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/internal/netns"
	"github.com/nodeagent/nodeagent/runtime"
)

// The namespaces a pod's containers share, as kubelet asks a CRI runtime
// for them (NamespaceOption: network, IPC and UTS are the pod's unless
// hostNetwork/hostIPC; PID is the container's own, the pod's with
// shareProcessNamespace, the host's with hostPID). Where a CRI runtime
// keeps them alive with its sandbox's pause process, nodeagent holds
// network, IPC and UTS namespaces with bind mounts (no process; see
// internal/netns), and starts a pause container only for a
// shareProcessNamespace pod: a PID namespace lives only as long as its
// PID 1.
//
// The files of pod UID are in PodNSDir/UID (ipc, uts, shm: the pod's
// /dev/shm); its pause container carries the label
// runtime.LabelPausePodUID and no pod container labels, so the PLEG and
// pod status never see it. An agent restart finds both again.

// PodNamespaceHolder keeps pods' IPC and UTS namespaces and /dev/shm;
// the default is internal/netns.
type PodNamespaceHolder interface {
	Create(dir string, o netns.PodNamespaces) error
	Remove(dir string) error
}

// PauseRuntime runs pods' pause containers; *runtime.Runtime implements
// it.
type PauseRuntime interface {
	CreatePause(ctx context.Context, spec runtime.PauseSpec) (string, error)
	ListPauses(ctx context.Context, uid types.UID) ([]runtime.Pause, error)
	StopContainer(ctx context.Context, id string, grace time.Duration) error
	RemoveContainer(ctx context.Context, id string) error
}

var _ PauseRuntime = (*runtime.Runtime)(nil)

type hostPodNS struct{}

func (hostPodNS) Create(dir string, o netns.PodNamespaces) error { return netns.CreatePod(dir, o) }
func (hostPodNS) Remove(dir string) error                        { return netns.RemovePod(dir) }

// podNamespaces is a pod's shared namespaces: its IPC and UTS
// namespaces and /dev/shm, held by the files in dir, and for a
// shareProcessNamespace pod the pause container whose PID namespace its
// containers join. It belongs to the pod's worker and is used from its
// goroutine.
type podNamespaces struct {
	uid     types.UID
	dir     string             // the pod's namespace files (PodNSDir/UID)
	holder  PodNamespaceHolder // nil: containers keep their own IPC/UTS
	pauses  PauseRuntime       // nil: no shareProcessNamespace
	cgroups PodCgroups         // the pause's cgroup parent (nil: the runtime's default)
	rootfs  string             // the pause's root filesystem
	log     *slog.Logger

	pausePID uint32 // the pod's running pause process (0: none)
	// user is the pod's user namespace (nil: the host's), set with the
	// sandbox (userns.go).
	user *runtime.UserNamespace
	// attached: the worker attached the pod's network namespace to the
	// pod network (the namespace and the attachment are the worker's own
	// until releaseSandbox); later syncs do not ask the network again.
	attached bool
}

func newPodNamespaces(d *workerDeps, uid types.UID, log *slog.Logger) podNamespaces {
	return podNamespaces{uid: uid, dir: filepath.Join(d.podNSDir, string(uid)), holder: d.podNS, pauses: d.pauses,
		cgroups: d.cgroups, rootfs: filepath.Join(d.rootDir, "pause-rootfs"), log: log}
}

// podNSPlan is which shared namespaces a pod gets.
type podNSPlan struct {
	ns netns.PodNamespaces
	// pause: the pod's PID namespace, held by a pause container.
	pause bool
}

// podNamespacesFor decides a pod's shared namespaces: IPC (and /dev/shm)
// unless hostIPC, UTS (with hostname) unless hostNetwork, a PID
// namespace with shareProcessNamespace unless hostPID (the API refuses
// both at once).
func podNamespacesFor(pod *v1.Pod, hostname string) podNSPlan {
	p := podNSPlan{ns: netns.PodNamespaces{IPC: !pod.Spec.HostIPC, UTS: !pod.Spec.HostNetwork}}
	if p.ns.UTS {
		p.ns.Hostname = hostname
	}
	sp := pod.Spec.ShareProcessNamespace
	p.pause = sp != nil && *sp && !pod.Spec.HostPID
	return p
}

// pauseDecision picks the pause to use among a pod's pauses (the running
// one, nil: start one) and those to remove (exited ones, duplicates). A
// pause whose state is unknown is neither (see errPauseUnknown).
func pauseDecision(ps []runtime.Pause) (use *runtime.Pause, remove []string) {
	for i := range ps {
		if ps[i].State == runtime.StateUnknown {
			continue
		}
		if use == nil && ps[i].State == runtime.StateRunning && ps[i].Pid != 0 {
			use = &ps[i]
			continue
		}
		remove = append(remove, ps[i].ID)
	}
	return use, remove
}

// pauseExit is how pause id of ps ended, for the log ("" if unknown).
func pauseExit(ps []runtime.Pause, id string) string {
	for _, p := range ps {
		if p.ID == id {
			return p.Exit
		}
	}
	return ""
}

// setup makes the pod's IPC and UTS namespaces (the UTS one with
// hostname) and, for a shareProcessNamespace pod, finds its running pause
// (pausePID), removing dead or duplicate ones, and the running one too
// once the pod is terminal (as kubelet stops a finished pod's sandbox).
// ensurePause starts one when a container is about to start.
func (n *podNamespaces) setup(ctx context.Context, pod *v1.Pod, hostname string, terminal bool) error {
	n.pausePID = 0
	if n.holder == nil {
		return nil
	}
	p := podNamespacesFor(pod, hostname)
	if p.ns.IPC || p.ns.UTS {
		if err := n.holder.Create(n.dir, p.ns); err != nil {
			return fmt.Errorf("pod namespaces: %w", err)
		}
	}
	if !p.pause {
		return nil
	}
	if n.pauses == nil {
		return errors.New("pod PID namespace: shareProcessNamespace needs a runtime with pause containers")
	}
	ps, err := n.pauses.ListPauses(ctx, n.uid)
	if err != nil {
		return fmt.Errorf("pod PID namespace: %w", err)
	}
	if err := pauseUnknown(ps); err != nil {
		return err
	}
	use, remove := pauseDecision(ps)
	if use != nil && terminal {
		n.log.Info("stopping the pause of a finished pod", "containerID", use.ID)
		if err := n.pauses.StopContainer(ctx, use.ID, gracePeriod(pod)); err != nil {
			return fmt.Errorf("pod PID namespace: %w", err)
		}
		remove, use = append(remove, use.ID), nil
	}
	for _, id := range remove {
		// A dead pause took the PID namespace and its processes with it
		// (the kernel kills them); a duplicate holds nothing.
		n.log.Info("removing a pause container", "containerID", id, "ended", pauseExit(ps, id))
		if err := n.pauses.RemoveContainer(ctx, id); err != nil {
			return fmt.Errorf("pod PID namespace: %w", err)
		}
	}
	if use != nil {
		n.pausePID = use.Pid
	}
	return nil
}

// ensurePause starts the pause of a shareProcessNamespace pod when one of
// its containers is about to start (starting says so) and none runs; the
// pause joins the pod's network namespace netnsPath.
func (n *podNamespaces) ensurePause(ctx context.Context, pod *v1.Pod, hostname, netnsPath string, starting bool) error {
	if !starting || n.pausePID != 0 || n.holder == nil {
		return nil
	}
	p := podNamespacesFor(pod, hostname)
	if !p.pause {
		return nil
	}
	return n.startPause(ctx, pod, p, netnsPath)
}

// startPause creates and starts the pod's pause and sets pausePID.
func (n *podNamespaces) startPause(ctx context.Context, pod *v1.Pod, p podNSPlan, netnsPath string) error {
	if n.pauses == nil {
		return errors.New("pod PID namespace: shareProcessNamespace needs a runtime with pause containers")
	}
	spec := runtime.PauseSpec{
		Pod:         runtime.PodRef{UID: pod.UID, Name: pod.Name, Namespace: pod.Namespace},
		RootfsDir:   n.rootfs,
		HostNetwork: pod.Spec.HostNetwork,
		HostIPC:     pod.Spec.HostIPC,
	}
	spec.PodNamespaces = n.paths(p)
	if !pod.Spec.HostNetwork {
		spec.NetNSPath = netnsPath
	}
	if n.cgroups != nil {
		parent, err := n.cgroups.EnsurePod(pod)
		if err != nil {
			return fmt.Errorf("pod cgroup: %w", err)
		}
		spec.CgroupParent = parent
	}
	id, err := n.pauses.CreatePause(ctx, spec)
	if err != nil {
		return fmt.Errorf("pod PID namespace: %w", err)
	}
	ps, err := n.pauses.ListPauses(ctx, n.uid)
	if err != nil {
		return fmt.Errorf("pod PID namespace: %w", err)
	}
	use, _ := pauseDecision(ps)
	if use == nil || use.ID != id {
		return fmt.Errorf("pod PID namespace: pause container %s is not running", id)
	}
	n.pausePID = use.Pid
	n.log.Info("started the pod's pause process", "containerID", id, "pid", n.pausePID)
	return nil
}

// paths are the files of the namespaces p makes.
func (n *podNamespaces) paths(p podNSPlan) runtime.PodNamespaces {
	var out runtime.PodNamespaces
	if p.ns.IPC {
		out.IPCPath, out.ShmPath = filepath.Join(n.dir, netns.IPCFile), filepath.Join(n.dir, netns.ShmDir)
	}
	if p.ns.UTS {
		out.UTSPath = filepath.Join(n.dir, netns.UTSFile)
	}
	return out
}

// of are the pod's namespaces its containers join, and its PID namespace
// ("": none; held by its pause process).
func (n *podNamespaces) of(pod *v1.Pod, hostname string) (runtime.PodNamespaces, string) {
	if n.holder == nil {
		return runtime.PodNamespaces{}, ""
	}
	p := podNamespacesFor(pod, hostname)
	var pidNS string
	if p.pause && n.pausePID != 0 {
		pidNS = pidNSPath(n.pausePID)
	}
	return n.paths(p), pidNS
}

// pidNSPath is the PID namespace of process pid.
func pidNSPath(pid uint32) string {
	return "/proc/" + strconv.FormatUint(uint64(pid), 10) + "/ns/pid"
}

// teardown stops and removes the pod's pause containers and removes its
// namespace files (after its containers are gone).
func (n *podNamespaces) teardown(ctx context.Context, pod *v1.Pod) error {
	if n.pauses != nil {
		ps, err := n.pauses.ListPauses(ctx, n.uid)
		if err != nil {
			return fmt.Errorf("pod PID namespace: %w", err)
		}
		for _, p := range ps {
			if err := n.pauses.StopContainer(ctx, p.ID, gracePeriod(pod)); err != nil {
				return fmt.Errorf("pod PID namespace: %w", err)
			}
			if err := n.pauses.RemoveContainer(ctx, p.ID); err != nil {
				return fmt.Errorf("pod PID namespace: %w", err)
			}
		}
	}
	if n.holder == nil {
		return nil
	}
	if err := n.holder.Remove(n.dir); err != nil {
		return fmt.Errorf("pod namespaces: %w", err)
	}
	return nil
}

// pauseOrphans adds the pods whose pause containers are left to refs (a
// pod deleted while the agent was down).
func (m *Manager) pauseOrphans(ctx context.Context, refs map[types.UID]runtime.PodRef) {
	if m.deps.pauses == nil {
		return
	}
	ps, err := m.deps.pauses.ListPauses(ctx, "")
	if err != nil {
		m.log.Warn("cannot list pause containers to clean up orphans", "err", err)
		return
	}
	for _, p := range ps {
		if refs[p.Pod.UID].UID == "" {
			refs[p.Pod.UID] = p.Pod
		}
	}
}
