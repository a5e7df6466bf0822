// Package containerspec turns a pod's container into the container the
// runtime creates (runtime.ContainerSpec), as kubelet's
// kuberuntime_container.go generates a CRI ContainerConfig.
//
// Build is the one entry point: from the pod, the container and Inputs
// (what the pod's worker resolved: volume host paths, the environment's
// sources, the pod's addresses, its runtime type, namespaces, cgroups, log
// path) it makes the environment (kubelet's makeEnvironmentVariables), the
// $(VAR) expansion of command and args, the mounts with their subPaths,
// the name-service and termination-message mounts, the security settings
// with kubelet's semantics (runAsNonRoot refused with kubelet's messages),
// the cgroup values of the container's resources, and its stdio.
//
// Build reads nothing but its inputs and the small interfaces in them
// (Cgroups, ImageUsers, the ConfigMap and Secret getters of Env). Its side
// effects are on the host, under Inputs.PodDir: subPath directories and
// the fresh termination-message file, and the pod cgroup made through
// Cgroups. Its errors are configuration errors: the worker reports them
// as kubelet's CreateContainerConfigError.
package containerspec

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/network"
	"github.com/nodeagent/nodeagent/pods/volume"
	"github.com/nodeagent/nodeagent/runtime"
)

// LabelTerminationMessagePath is the label holding the host file a
// container's terminationMessagePath is bind-mounted from, so that its
// message is found again after an agent restart.
const LabelTerminationMessagePath = "io.nodeagent.termination-message-path"

// The pod's name-service files in its directory: etc-hosts is kubelet's
// name; resolv.conf and hostname are what containerd keeps per sandbox.
const (
	HostsFile      = "etc-hosts"
	ResolvConfFile = "resolv.conf"
	HostnameFile   = "hostname"
)

// stdioDirName is the directory under the pod's directory that holds its
// containers' stdin (and, without a terminal, output) FIFOs: it outlives
// the agent, so a restart neither closes a container's stdin nor loses
// attach (see runtime's stdio.go).
const stdioDirName = "stdio"

// Cgroups places containers in their pod's cgroup; *cm.Manager implements
// it.
type Cgroups interface {
	// EnsurePod makes the pod's cgroup (once) and returns its containers'
	// cgroup parent.
	EnsurePod(pod *v1.Pod) (string, error)
	// OOMScoreAdj is the oom_score_adj of container c of pod.
	OOMScoreAdj(pod *v1.Pod, c *v1.Container) int
	// SwapMax is the swap container c of pod may use beyond its memory
	// (nil: the runtime's default).
	SwapMax(pod *v1.Pod, c *v1.Container) *int64
}

// Inputs are what a container's spec is made of besides the pod and the
// container, as the pod's worker resolved them.
type Inputs struct {
	// Attempt is the container's restart count.
	Attempt uint32
	// PodDir is the pod's directory (its volumes, name-service files,
	// stdio FIFOs and termination-message files are under it).
	PodDir string
	// LogPath receives the container's output (kubelet's log file).
	LogPath string
	// Volumes are the pod's volumes' host paths by volume name.
	Volumes map[string]string
	// Env are the environment's sources.
	Env Env
	// Labels are the container's own labels (the spec hash).
	Labels map[string]string
	// NameFiles: the pod's name-service files are written in PodDir and
	// are bind-mounted into the container.
	NameFiles bool
	// Hostname is the UTS hostname ("" for host-network pods).
	Hostname string
	// NetNSPath is the pod's network namespace (unused with hostNetwork).
	NetNSPath string
	// Cgroups puts the container in its pod's cgroup (nil: the runtime's
	// default cgroup parent).
	Cgroups Cgroups
	// RuntimeType is the containerd runtime of the pod's RuntimeClass
	// ("": the default; see RuntimeType).
	RuntimeType string
	// Security are the node's security settings; Images reads image users
	// for runAsNonRoot (nil: a container that needs it is refused).
	Security SecurityOptions
	Images   ImageUsers
	// PodNamespaces are the pod's IPC and UTS namespaces and /dev/shm.
	PodNamespaces runtime.PodNamespaces
	// PIDNSPath is the PID namespace the container joins: its pod's with
	// shareProcessNamespace, its target's for an ephemeral container (""
	// its own).
	PIDNSPath string
	// Devices are what device plugins' Allocate gave the container.
	Devices Devices
	// CPUSet is the container's cpuset.cpus from the CPU manager ("": the
	// parent's); Exclusive: the CPUs are the container's own, and it runs
	// without a CFS quota (kubelet's DisableCPUQuotaWithExclusiveCPUs).
	CPUSet    string
	Exclusive bool
	// NoCPUQuota: kubelet's cpuCFSQuota is false; the container gets no
	// CFS quota whatever its limit.
	NoCPUQuota bool
}

// Devices are a container's device-plugin allocations merged (kubelet's
// DeviceRunContainerOptions): device nodes, mounts, environment variables,
// annotations and CDI device names. Env entries are KEY=VALUE and come
// before the container's own environment, as kubelet orders them; mounts
// come before the volumes' mounts.
type Devices struct {
	Devices     []runtime.Device
	Mounts      []runtime.Mount
	Env         []string
	Annotations map[string]string
	CDIDevices  []string
}

// Build turns container c of pod into what the runtime creates.
func Build(ctx context.Context, pod *v1.Pod, c *v1.Container, in Inputs) (runtime.ContainerSpec, error) {
	env, err := makeEnv(pod, c, in.Env)
	if err != nil {
		return runtime.ContainerSpec{}, err
	}
	lookup := envLookup(env)
	mounts, err := volume.ContainerMountsWithSubPaths(in.PodDir, c, in.Volumes, subPathExpander(lookup))
	if err != nil {
		return runtime.ContainerSpec{}, err
	}
	for i, m := range c.VolumeMounts {
		if volume.MustMountReadOnly(pod, m.Name) {
			mounts[i].ReadOnly = true
		}
	}
	devices, err := blockDevices(pod, c, in.Volumes)
	if err != nil {
		return runtime.ContainerSpec{}, err
	}
	spec := runtime.ContainerSpec{
		Pod:         runtime.PodRef{UID: pod.UID, Name: pod.Name, Namespace: pod.Namespace},
		Name:        c.Name,
		Attempt:     in.Attempt,
		Image:       c.Image,
		Command:     ExpandAll(c.Command, lookup),
		Args:        ExpandAll(c.Args, lookup),
		Env:         append(slices.Clone(in.Devices.Env), env...),
		WorkingDir:  c.WorkingDir,
		Mounts:      append(slices.Clone(in.Devices.Mounts), mounts...),
		Devices:     append(slices.Clone(in.Devices.Devices), devices...),
		Annotations: maps.Clone(in.Devices.Annotations),
		CDIDevices:  slices.Clone(in.Devices.CDIDevices),
		Resources:   PodResources(pod, c),
		LogPath:     in.LogPath,
		HostNetwork: pod.Spec.HostNetwork,
		Labels:      maps.Clone(in.Labels),
		Hostname:    in.Hostname,
	}
	if in.NameFiles {
		spec.Mounts = append(spec.Mounts, nameMounts(in.PodDir, c)...)
	}
	if in.Cgroups != nil {
		parent, err := in.Cgroups.EnsurePod(pod)
		if err != nil {
			return runtime.ContainerSpec{}, fmt.Errorf("pod cgroup: %w", err)
		}
		adj := in.Cgroups.OOMScoreAdj(pod, c)
		spec.CgroupParent, spec.OOMScoreAdj = parent, &adj
		spec.Resources.SwapMax = in.Cgroups.SwapMax(pod, c)
	}
	spec.Resources.CPUSetCPUs = in.CPUSet
	if in.Exclusive || in.NoCPUQuota {
		spec.Resources.CPUQuota, spec.Resources.CPUPeriod = 0, 0
	}
	spec.Stdin, spec.StdinOnce, spec.TTY = c.Stdin, c.StdinOnce, c.TTY
	if c.Stdin || c.TTY {
		spec.StdioDir = filepath.Join(in.PodDir, stdioDirName)
	}
	if !pod.Spec.HostNetwork {
		spec.NetNSPath = in.NetNSPath
	}
	if err := terminationMount(in.PodDir, c, &spec); err != nil {
		return runtime.ContainerSpec{}, err
	}
	spec.RuntimeType = in.RuntimeType
	if spec.Security, err = security(ctx, pod, c, in.Security, in.Images); err != nil {
		return runtime.ContainerSpec{}, err
	}
	spec.PodNamespaces = in.PodNamespaces
	if in.PIDNSPath != "" {
		spec.Security.PIDNSPath = in.PIDNSPath
	}
	return spec, nil
}

// Resources maps requests and limits to cgroup limits as kubelet does:
// cpu request → shares (min 2), cpu limit → CFS quota over 100ms, memory
// limit → memory limit.
func Resources(c *v1.Container) runtime.Resources {
	var r runtime.Resources
	cpuReq := c.Resources.Requests.Cpu()
	if cpuReq.IsZero() {
		cpuReq = c.Resources.Limits.Cpu()
	}
	r.CPUShares = milliCPUToShares(cpuReq.MilliValue())
	if l, ok := c.Resources.Limits[v1.ResourceCPU]; ok && !l.IsZero() {
		r.CPUQuota, r.CPUPeriod = cpuQuota(l.MilliValue()), cfsPeriod
	}
	if l, ok := c.Resources.Limits[v1.ResourceMemory]; ok && !l.IsZero() {
		r.MemoryLimitBytes = l.Value()
	}
	return r
}

// PodResources is Resources for container c of pod: where the container
// sets no cpu or memory limit and the pod has pod-level resources, the
// pod-level limit is the container's (kubelet's getCPULimit and
// getMemoryLimit), so that the container cannot exceed its pod either.
// The cpu shares stay the container's own request's.
func PodResources(pod *v1.Pod, c *v1.Container) runtime.Resources {
	r := Resources(c)
	cpu, mem := kubetypes.ContainerLimitsWithPodLevel(pod, c)
	if r.CPUQuota == 0 && cpu > 0 {
		r.CPUQuota, r.CPUPeriod = cpuQuota(cpu), cfsPeriod
	}
	if r.MemoryLimitBytes == 0 && mem > 0 {
		r.MemoryLimitBytes = mem
	}
	return r
}

// cfsPeriod is the CFS period of every cpu limit (µs).
const cfsPeriod uint64 = 100000

// cpuQuota is the CFS quota of a cpu limit in millicores over cfsPeriod,
// at least 1ms.
func cpuQuota(milli int64) int64 {
	q := milli * int64(cfsPeriod) / 1000
	if q < 1000 {
		q = 1000
	}
	return q
}

func milliCPUToShares(milli int64) uint64 {
	const minShares, sharesPerCPU = 2, 1024
	if milli == 0 {
		return minShares
	}
	s := milli * sharesPerCPU / 1000
	if s < minShares {
		return minShares
	}
	return uint64(s)
}

// nameMounts are the bind mounts of the pod's name-service files into c:
// /etc/hosts unless c mounts a volume there itself (kubelet's rule),
// /etc/resolv.conf and /etc/hostname (containerd's, likewise skipped
// where c mounts something).
func nameMounts(podDir string, c *v1.Container) []runtime.Mount {
	taken := map[string]bool{}
	for _, m := range c.VolumeMounts {
		taken[filepath.Clean(m.MountPath)] = true
	}
	var out []runtime.Mount
	for _, m := range []struct{ file, target string }{
		{HostsFile, network.EtcHostsPath},
		{ResolvConfFile, network.EtcResolvConfPath},
		{HostnameFile, network.EtcHostnamePath},
	} {
		if !taken[m.target] {
			out = append(out, runtime.Mount{HostPath: filepath.Join(podDir, m.file), ContainerPath: m.target})
		}
	}
	return out
}

// terminationMount gives a container a fresh, empty, world-writable host
// file at its terminationMessagePath, as kubelet:
// <pod dir>/containers/<name>/<random>.
func terminationMount(podDir string, c *v1.Container, spec *runtime.ContainerSpec) error {
	if c.TerminationMessagePath == "" {
		return nil
	}
	dir := filepath.Join(podDir, "containers", c.Name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("termination message file: %w", err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	host := filepath.Join(dir, hex.EncodeToString(b))
	f, err := os.Create(host)
	if err != nil {
		return fmt.Errorf("termination message file: %w", err)
	}
	f.Close()
	// Whatever the umask, any user of the container may write it.
	if err := os.Chmod(host, 0o666); err != nil {
		return fmt.Errorf("termination message file: %w", err)
	}
	path := c.TerminationMessagePath
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	spec.Mounts = append(spec.Mounts, runtime.Mount{HostPath: host, ContainerPath: path})
	if spec.Labels == nil {
		spec.Labels = map[string]string{}
	}
	spec.Labels[LabelTerminationMessagePath] = host
	return nil
}

// blockDevices are the container's volumeDevices as kubelet passes them
// (makeBlockVolumes): the device behind the volume's symlink in the pod's
// directory (the volume's host path, see csi's block.go), at devicePath,
// with the cgroup permissions "mrw", or "r" for a read-only claim. The
// symlink is resolved here, as containerd's CRI plugin resolves a
// device's host path.
func blockDevices(pod *v1.Pod, c *v1.Container, vols map[string]string) ([]runtime.Device, error) {
	var out []runtime.Device
	for _, d := range c.VolumeDevices {
		if !filepath.IsAbs(d.DevicePath) {
			return nil, fmt.Errorf("error DevicePath `%s` must be an absolute path", d.DevicePath)
		}
		link, ok := vols[d.Name]
		fi, err := os.Lstat(link)
		if !ok || err != nil || fi.Mode()&os.ModeSymlink == 0 {
			return nil, fmt.Errorf("cannot find volume %q to pass into container %q", d.Name, c.Name)
		}
		host, err := filepath.EvalSymlinks(link)
		if err != nil {
			return nil, fmt.Errorf("cannot find volume %q to pass into container %q: %v", d.Name, c.Name, err)
		}
		perm := "mrw"
		if volume.MustMountReadOnly(pod, d.Name) {
			perm = "r"
		}
		out = append(out, runtime.Device{HostPath: host, ContainerPath: d.DevicePath, Permissions: perm})
	}
	return out, nil
}
