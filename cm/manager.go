package cm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sync"

	"github.com/opencontainers/cgroups"
	cgmanager "github.com/opencontainers/cgroups/manager"
	"github.com/opencontainers/cgroups/systemd"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Config configures a Manager.
type Config struct {
	// Systemd selects the systemd driver (slices through D-Bus) instead
	// of cgroupfs.
	Systemd bool
	// Root is the cgroup the kubepods hierarchy is made under (nil: the
	// root). See ParseRoot and RootForNamespace.
	Root CgroupName
	// CgroupsPerQOS makes kubepods, its QoS levels and pod cgroups; false
	// puts containers directly under Root.
	CgroupsPerQOS bool
	// PodPidsLimit is each pod cgroup's pids limit (<= 0: none).
	PodPidsLimit int64
	// Allocatable is what kubepods may use (capacity minus systemReserved
	// and kubeReserved): its cpu shares, and its memory and pids limits
	// when EnforceAllocatable.
	Allocatable        v1.ResourceList
	EnforceAllocatable bool
	// MemoryCapacity is the node's memory in bytes, for OOM scores and
	// LimitedSwap shares.
	MemoryCapacity int64
	// Swap is how containers may use swap (kubelet's memorySwap).
	Swap Swap
	// LegacyParent is where agents before this layout put pod cgroups
	// (<LegacyParent>/<uid>); RemovePod removes those too. "" for none.
	LegacyParent string
	// PodExclusiveCPUs: a container of the pod has exclusive CPUs; the
	// pod cgroup then has no CFS quota (kubelet's
	// DisableCPUQuotaWithExclusiveCPUs). nil: never.
	PodExclusiveCPUs func(pod *v1.Pod) bool
	// NoCPUQuota is kubelet's cpuCFSQuota: false (its EnforceCPULimits
	// false): no pod cgroup gets a CFS quota.
	NoCPUQuota bool
	// HugetlbPageSizes lists the page sizes whose hugetlb limits the
	// host's cgroups take (nil: HugetlbPageSizes, read once in New).
	HugetlbPageSizes func() []string
	Logger           *slog.Logger
}

// Manager makes and removes the kubepods hierarchy and pod cgroups. Its
// methods may be called concurrently (pod workers call EnsurePod and
// RemovePod); Run owns the burstable QoS cgroup's updates.
type Manager struct {
	cfg Config
	log *slog.Logger

	mu   sync.Mutex
	pods map[types.UID]podEntry // pods whose cgroup exists
	kick chan struct{}          // 1-buffered: the burstable sum may have changed

	lastBurstable uint64 // owned by Run

	hugetlb []string // page sizes with hugetlb limits (HugetlbPageSizes)
}

type podEntry struct {
	parent   string // containers' cgroup parent
	qos      v1.PodQOSClass
	milliCPU int64 // summed cpu request
}

// New checks the configuration; it makes no cgroups (see Setup).
func New(cfg Config) (*Manager, error) {
	if cfg.Systemd && !systemd.IsRunningSystemd() {
		return nil, errors.New("cm: cgroupDriver systemd, but systemd is not running on this host (no /run/systemd/system)")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.HugetlbPageSizes == nil {
		cfg.HugetlbPageSizes = HugetlbPageSizes
	}
	return &Manager{cfg: cfg, log: cfg.Logger, pods: map[types.UID]podEntry{}, kick: make(chan struct{}, 1), hugetlb: cfg.HugetlbPageSizes()}, nil
}

func (m *Manager) kubepods() CgroupName   { return m.cfg.Root.Child("kubepods") }
func (m *Manager) burstable() CgroupName  { return m.kubepods().Child("burstable") }
func (m *Manager) besteffort() CgroupName { return m.kubepods().Child("besteffort") }

// PodCgroup is the name of the pod's cgroup, nil without cgroupsPerQOS.
func (m *Manager) PodCgroup(uid types.UID, qos v1.PodQOSClass) CgroupName {
	if !m.cfg.CgroupsPerQOS {
		return nil
	}
	return PodCgroupNameFor(m.cfg.Root, uid, qos)
}

// PodCgroupNameFor is the pod cgroup's name under root for its QoS class.
func PodCgroupNameFor(root CgroupName, uid types.UID, qos v1.PodQOSClass) CgroupName {
	kp := root.Child("kubepods")
	switch qos {
	case v1.PodQOSBurstable:
		return kp.Child("burstable", PodCgroupName(uid))
	case v1.PodQOSBestEffort:
		return kp.Child("besteffort", PodCgroupName(uid))
	}
	return kp.Child(PodCgroupName(uid))
}

// Path is the name as a path below each cgroup mount for the driver.
func (m *Manager) Path(n CgroupName) string {
	if m.cfg.Systemd {
		return n.ToSystemd()
	}
	return n.ToCgroupfs()
}

// ContainerParent is what the runtime gets as the containers' cgroup
// parent: a cgroupfs path, or with systemd the slice unit (containerd's
// CRI plugin likewise passes "<slice>:cri-containerd:<id>" to runc).
func (m *Manager) ContainerParent(n CgroupName) string {
	if m.cfg.Systemd {
		return n.SystemdSlice()
	}
	return n.ToCgroupfs()
}

// WatchParents are the cgroup paths (below the unified mount) whose child
// directories are pod cgroups, for the PLEG's cgroup event source; the
// legacy parent included.
func (m *Manager) WatchParents() []string {
	var out []string
	if m.cfg.CgroupsPerQOS {
		out = append(out, m.Path(m.kubepods()), m.Path(m.burstable()), m.Path(m.besteffort()))
	}
	if m.cfg.LegacyParent != "" {
		out = append(out, m.cfg.LegacyParent)
	}
	return out
}

// Setup makes kubepods (cpu shares from allocatable; memory, pids and
// hugetlb limits when enforced) and the burstable and besteffort QoS
// cgroups (2 cpu shares until burstable pods arrive; hugetlb unbounded, as
// kubelet's, so that the pod cgroups' limits are what counts).
func (m *Manager) Setup() error {
	if !m.cfg.CgroupsPerQOS {
		return nil
	}
	kp := NodeAllocatableConfig(m.cfg.Allocatable, m.cfg.EnforceAllocatable)
	if err := m.apply(m.kubepods(), kp); err != nil {
		return fmt.Errorf("cm: kubepods cgroup %s: %w", m.Path(m.kubepods()), err)
	}
	min := uint64(MinShares)
	for _, n := range []CgroupName{m.burstable(), m.besteffort()} {
		if err := m.apply(n, ResourceConfig{CPUShares: &min, HugePageLimit: UnboundedHugePages(m.hugetlb)}); err != nil {
			return fmt.Errorf("cm: QoS cgroup %s: %w", m.Path(n), err)
		}
	}
	m.log.Info("pod cgroups laid out", "kubepods", m.Path(m.kubepods()), "systemd", m.cfg.Systemd)
	return nil
}

// EnsurePod makes the pod's cgroup with its limits, once, and returns the
// containers' cgroup parent (see ContainerParent).
func (m *Manager) EnsurePod(pod *v1.Pod) (string, error) {
	m.mu.Lock()
	e, ok := m.pods[pod.UID]
	m.mu.Unlock()
	if ok {
		return e.parent, nil
	}
	qos := QOSClass(pod)
	n := m.PodCgroup(pod.UID, qos)
	if n == nil {
		return m.ContainerParent(m.cfg.Root), nil
	}
	rc := PodResourceConfig(pod, m.cfg.PodPidsLimit)
	if m.cfg.NoCPUQuota || (m.cfg.PodExclusiveCPUs != nil && m.cfg.PodExclusiveCPUs(pod)) {
		rc = WithoutCPUQuota(rc)
	}
	if err := m.apply(n, rc); err != nil {
		return "", fmt.Errorf("pod cgroup %s: %w", m.Path(n), err)
	}
	e = podEntry{parent: m.ContainerParent(n), qos: qos, milliCPU: podCPURequest(pod)}
	m.mu.Lock()
	m.pods[pod.UID] = e
	m.mu.Unlock()
	if qos == v1.PodQOSBurstable {
		poke(m.kick)
	}
	return e.parent, nil
}

// RemovePod removes the pod's cgroup, under whichever QoS level it is (an
// orphan found after a restart has no spec), and the cgroup an older agent
// made at LegacyParent/<uid>. Its containers must be gone: a cgroup that
// still has processes fails to go (EBUSY) and the caller retries.
func (m *Manager) RemovePod(uid types.UID) error {
	if uid == "" || path.Base(string(uid)) != string(uid) || uid == "." || uid == ".." {
		return fmt.Errorf("cm: remove pod cgroup: bad pod UID %q", uid)
	}
	var errs []error
	if m.cfg.CgroupsPerQOS {
		for _, qos := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
			n := m.PodCgroup(uid, qos)
			if err := m.destroy(n); err != nil {
				errs = append(errs, fmt.Errorf("remove pod cgroup %s: %w", m.Path(n), err))
			}
		}
	}
	if m.cfg.LegacyParent != "" {
		p := path.Join(m.cfg.LegacyParent, string(uid))
		if err := destroyCgroupfs(p); err != nil {
			errs = append(errs, fmt.Errorf("remove pod cgroup %s: %w", p, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	m.mu.Lock()
	e, ok := m.pods[uid]
	delete(m.pods, uid)
	m.mu.Unlock()
	if ok && e.qos == v1.PodQOSBurstable {
		poke(m.kick)
	}
	return nil
}

// OOMScoreAdj is the container's oom_score_adj (see OOMScoreAdj).
func (m *Manager) OOMScoreAdj(pod *v1.Pod, c *v1.Container) int {
	return OOMScoreAdj(pod, c, m.cfg.MemoryCapacity)
}

// SwapMax is the container's swap beyond its memory (see
// ContainerSwapMax; nil: leave the runtime's default).
func (m *Manager) SwapMax(pod *v1.Pod, c *v1.Container) *int64 {
	return ContainerSwapMax(pod, c, m.cfg.MemoryCapacity, m.cfg.Swap)
}

// Run keeps the burstable QoS cgroup's cpu shares equal to the summed cpu
// requests of the burstable pods, until ctx is done.
func (m *Manager) Run(ctx context.Context) {
	if !m.cfg.CgroupsPerQOS {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
			m.updateQoS()
		}
	}
}

// updateQoS writes the burstable shares when they changed. Only Run calls
// it (and tests).
func (m *Manager) updateQoS() {
	m.mu.Lock()
	var sum int64
	for _, e := range m.pods {
		if e.qos == v1.PodQOSBurstable {
			sum += e.milliCPU
		}
	}
	m.mu.Unlock()
	shares := BurstableShares(sum)
	if shares == m.lastBurstable {
		return
	}
	if err := m.apply(m.burstable(), ResourceConfig{CPUShares: &shares}); err != nil {
		m.log.Warn("cannot update the burstable QoS cgroup", "cgroup", m.Path(m.burstable()), "shares", shares, "err", err)
		return
	}
	m.lastBurstable = shares
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// libctConfig is the library's description of cgroup n (kubelet's
// libctCgroupConfig): a path for cgroupfs; parent slice and name for
// systemd.
func (m *Manager) libctConfig(n CgroupName, res *cgroups.Resources) *cgroups.Cgroup {
	c := &cgroups.Cgroup{Systemd: m.cfg.Systemd, Resources: res}
	if !m.cfg.Systemd {
		c.Path = n.ToCgroupfs()
		return c
	}
	c.Parent = n[:len(n)-1].SystemdSlice()
	c.Name = n.SystemdSlice()
	return c
}

// apply makes cgroup n (Apply(-1) creates it with no process) and sets
// rc on it.
func (m *Manager) apply(n CgroupName, rc ResourceConfig) error {
	res := toResources(rc, cgroups.IsCgroup2UnifiedMode(), m.hugetlb)
	mgr, err := cgmanager.New(m.libctConfig(n, res))
	if err != nil {
		return err
	}
	if err := mgr.Apply(-1); err != nil {
		return err
	}
	return mgr.Set(res)
}

func (m *Manager) destroy(n CgroupName) error {
	mgr, err := cgmanager.New(m.libctConfig(n, &cgroups.Resources{SkipDevices: true}))
	if err != nil {
		return err
	}
	return mgr.Destroy()
}

// destroyCgroupfs removes a cgroupfs-layout cgroup (and empty children)
// from every hierarchy.
func destroyCgroupfs(p string) error {
	mgr, err := cgmanager.New(&cgroups.Cgroup{Path: p, Resources: &cgroups.Resources{SkipDevices: true}})
	if err != nil {
		return err
	}
	return mgr.Destroy()
}

// toResources converts rc for the library: cpu shares become cpu.weight
// on cgroup v2, devices are left alone, nothing is frozen; hugetlb limits
// for the page sizes in hugetlb (none when the host has no hugetlb
// controller).
func toResources(rc ResourceConfig, v2 bool, hugetlb []string) *cgroups.Resources {
	r := &cgroups.Resources{SkipDevices: true, SkipFreezeOnSet: true}
	if rc.CPUShares != nil {
		if v2 {
			r.CpuWeight = SharesToWeight(*rc.CPUShares)
		} else {
			r.CpuShares = *rc.CPUShares
		}
	}
	if rc.CPUQuota != nil {
		r.CpuQuota = *rc.CPUQuota
	}
	if rc.CPUPeriod != nil {
		r.CpuPeriod = *rc.CPUPeriod
	}
	if rc.Memory != nil {
		r.Memory = *rc.Memory
	}
	if rc.PidsLimit != nil {
		p := *rc.PidsLimit
		r.PidsLimit = &p
	}
	if rc.HugePageLimit != nil {
		r.HugetlbLimit = hugetlbLimits(rc.HugePageLimit, hugetlb)
	}
	return r
}
