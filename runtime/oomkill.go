package runtime

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// OOM kills on cgroup v2 without containerd's TaskOOM.
//
// containerd reports an OOM kill with a TaskOOM event, which its shim makes
// when the oom_kill counter of the container's own memory.events rises. On
// cgroup v2 that event is lost when the container's cgroup goes before the
// shim reads the file: with the systemd driver and the whole container
// killed (memory.oom.group), the scope empties and systemd removes it
// within a fraction of a second (docs/vm.md). The agent therefore also
// decides from the cgroup files itself, when a container's init process
// exits by SIGKILL (137) and the agent did not stop it:
//
//   - the container's own memory.events, if its cgroup is still there (the
//     cgroupfs driver keeps it until the task is deleted): the container was
//     OOM-killed iff its oom_kill is above 0 (it counts every process of
//     that cgroup an OOM killer killed, since the cgroup was made);
//   - else the pod cgroup's memory.events, whose oom_kill is hierarchical
//     (it counts the kills in every container of the pod) and outlives the
//     containers: OOM-killed iff it is above both the value recorded when
//     the container started (label labelPodOOMKillsAtStart) and every value
//     already attributed to one of the pod's containers (labels
//     labelPodOOMKillsSeen), so one kill is not credited to two containers.
//
// Everything it needs is in the containers' labels, so an agent restarted
// in between decides as the old one would have; an exit the agent did not
// see (it was down) keeps containerd's reason. On cgroup v1 none of this
// runs: the TaskOOM event alone decides, as before.
const (
	// labelPodOOMKillsAtStart: the pod cgroup's oom_kill when the container
	// was started.
	labelPodOOMKillsAtStart = labelPrefix + "pod-oom-kills-at-start"
	// labelPodOOMKillsSeen: the pod cgroup's oom_kill when this container
	// was found OOM-killed; kills up to it are accounted for.
	labelPodOOMKillsSeen = labelPrefix + "pod-oom-kills-seen"

	// sigkillExitCode is the exit status containerd reports for a process
	// killed by SIGKILL (128 + 9).
	sigkillExitCode = 137

	// cgroup2Root is where the unified hierarchy is mounted.
	cgroup2Root = "/sys/fs/cgroup"
)

// oomKills reads the oom_kill counter of dir's memory.events (dir relative
// to root); ok is false when the file cannot be read or has no counter.
func oomKills(root, dir string) (n uint64, ok bool) {
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(dir), "memory.events"))
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, found := strings.Cut(sc.Text(), " ")
		if !found || k != "oom_kill" {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		return n, err == nil
	}
	return 0, false
}

// podCgroupDir is the cgroup (a path below the cgroup mount) of the pod of
// a container whose cgroupsPath is p: the container cgroup's parent, if
// that is the pod's own (its name holds the pod UID, as in kubelet's
// layout with either driver and in the runtime's default parent/<uid>);
// "" otherwise (cgroupsPerQOS false: the parent is shared by pods).
func podCgroupDir(p, uid string) string {
	if p == "" || uid == "" {
		return ""
	}
	parent := path.Dir(CgroupfsPath(p))
	b := path.Base(parent)
	if strings.Contains(b, uid) || strings.Contains(b, strings.ReplaceAll(uid, "-", "_")) {
		return parent
	}
	return ""
}

// podOOMKills is the oom_kill of the pod cgroup of the container with these
// labels; ok false when there is none to read.
func podOOMKills(root string, labels map[string]string) (uint64, bool) {
	dir := podCgroupDir(labels[labelCgroupsPath], labels[LabelPodUID])
	if dir == "" {
		return 0, false
	}
	return oomKills(root, dir)
}

// oomKilledFromCgroups decides whether a container with these labels, whose
// init process just exited by SIGKILL, was OOM-killed, from the cgroup
// files under root; seen are the labelPodOOMKillsSeen values of the pod's
// containers. set are the labels to record with the exit (nil when
// undecided or not OOM-killed).
func oomKilledFromCgroups(root string, labels map[string]string, seen []uint64) (oom bool, set map[string]string) {
	atStart, err := strconv.ParseUint(labels[labelPodOOMKillsAtStart], 10, 64)
	if err != nil {
		return false, nil // started by an agent without this, or no pod cgroup then
	}
	pod, podOK := podOOMKills(root, labels)
	if own, ok := oomKills(root, CgroupfsPath(labels[labelCgroupsPath])); ok {
		oom = own > 0
	} else {
		oom = podOK && pod > atStart
		for _, s := range seen {
			if pod <= s {
				oom = false
			}
		}
	}
	if !oom {
		return false, nil
	}
	set = map[string]string{labelOOMKilled: "true"}
	if podOK {
		set[labelPodOOMKillsSeen] = strconv.FormatUint(pod, 10)
	}
	return true, set
}

// inferOOM is oomKilledFromCgroups for a container whose exit with code
// is being recorded: only on cgroup v2, for a SIGKILL the agent did not
// send, not yet decided. It lists the pod's containers for their
// labelPodOOMKillsSeen. why says, for a SIGKILL exit on cgroup v2 that
// is not put down to an OOM kill, what the decision rested on ("" when
// it was not one to decide).
func (r *Runtime) inferOOM(ctx context.Context, id string, labels map[string]string, code int32) (set map[string]string, why string) {
	if !r.unified || code != sigkillExitCode || labels[labelOOMKilled] == "true" || labels[labelExitCode] != "" {
		return nil, ""
	}
	if labels[labelPodOOMKillsAtStart] == "" {
		return nil, "no pod cgroup oom_kill count recorded at its start"
	}
	if _, stopping := r.stopping.Load(id); stopping {
		return nil, "the agent was stopping it" // the agent's own SIGKILL (grace period over)
	}
	cs, err := r.podContainers(ctx, labels[LabelPodUID])
	if err != nil {
		r.opts.Logger.Warn("cannot look for an OOM kill: list the pod's containers", "containerID", id, "err", convertErr(err))
		return nil, ""
	}
	var seen []uint64
	for _, c := range cs {
		if c.ID == id {
			// Its own mark is this same exit recorded by the other
			// event loop: decide again, the same way.
			continue
		}
		if n, err := strconv.ParseUint(c.Labels[labelPodOOMKillsSeen], 10, 64); err == nil {
			seen = append(seen, n)
		}
	}
	oom, set := oomKilledFromCgroups(r.cgroupRoot, labels, seen)
	if !oom {
		own, ownOK := oomKills(r.cgroupRoot, CgroupfsPath(labels[labelCgroupsPath]))
		pod, podOK := podOOMKills(r.cgroupRoot, labels)
		why = fmt.Sprintf("its cgroup's oom_kill %s, the pod cgroup's %s (%s at its start, already attributed %v)",
			countOrGone(own, ownOK), countOrGone(pod, podOK), labels[labelPodOOMKillsAtStart], seen)
	}
	return set, why
}

// decideOOM is inferOOM for an exit about to be recorded, with the
// decision in the log: the labels to record with it.
func (r *Runtime) decideOOM(ctx context.Context, id string, labels map[string]string, code int32) map[string]string {
	set, why := r.inferOOM(ctx, id, labels, code)
	pod := labels[LabelPodNamespace] + "/" + labels[LabelPodName]
	switch {
	case set[labelOOMKilled] == "true":
		if _, logged := r.oomLogged.LoadOrStore(id, struct{}{}); logged {
			break
		}
		r.opts.Logger.Info("container OOM-killed (from the cgroups' memory.events)", "containerID", id,
			"pod", pod, "container", labels[LabelContainerName])
	case why != "":
		r.opts.Logger.Info("container killed by SIGKILL, not put down to the OOM killer", "containerID", id,
			"pod", pod, "container", labels[LabelContainerName], "why", why)
	}
	return set
}

func countOrGone(n uint64, ok bool) string {
	if !ok {
		return "unreadable (gone)"
	}
	return strconv.FormatUint(n, 10)
}

// podContainers lists the containers of the pod with this UID
// (Runtime.listPod in tests).
func (r *Runtime) podContainers(ctx context.Context, uid string) ([]containers.Container, error) {
	if r.listPod != nil {
		return r.listPod(ctx, uid)
	}
	return r.client.ContainerService().List(ctx, fmt.Sprintf(`labels.%q==%q`, LabelPodUID, uid))
}

// startOOMLabels are the labels StartContainer records for inferOOM: the
// pod cgroup's oom_kill now (on cgroup v2, when there is one to read).
func (r *Runtime) startOOMLabels(labels map[string]string) map[string]string {
	if !r.unified {
		return nil
	}
	n, ok := podOOMKills(r.cgroupRoot, labels)
	if !ok {
		return nil
	}
	return map[string]string{labelPodOOMKillsAtStart: strconv.FormatUint(n, 10)}
}

// withOOMGroup sets memory.oom.group to 1 in the container's cgroup through
// linux.resources.unified, as kubelet asks containerd to through the CRI's
// unified map when singleProcessOOMKill is false on cgroup v2: an OOM kill
// then kills every process of the container, not only the largest.
func withOOMGroup() oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if s.Linux == nil {
			s.Linux = &specs.Linux{}
		}
		if s.Linux.Resources == nil {
			s.Linux.Resources = &specs.LinuxResources{}
		}
		if s.Linux.Resources.Unified == nil {
			s.Linux.Resources.Unified = map[string]string{}
		}
		s.Linux.Resources.Unified["memory.oom.group"] = "1"
		return nil
	}
}

// oomGroupOpts are the spec options of memory.oom.group: on cgroup v2
// unless Options.SingleProcessOOMKill (on v1 there is no such file).
func oomGroupOpts(unified, singleProcess bool) []oci.SpecOpts {
	if !unified || singleProcess {
		return nil
	}
	return []oci.SpecOpts{withOOMGroup()}
}

// OOMKillRecorded reports whether c's labels, as last read, record an OOM
// kill of one of its processes (containerd's TaskOOM, or one found in the
// cgroups): its exit, whatever the status, is OOMKilled.
func OOMKillRecorded(c Container) bool { return c.Labels[labelOOMKilled] == "true" }
