package cm

import (
	"fmt"

	"github.com/opencontainers/cgroups"
	cgmanager "github.com/opencontainers/cgroups/manager"
	v1 "k8s.io/api/core/v1"
)

// PodDir is the path of pod's cgroup below each cgroup mount (as Path),
// false without pod cgroups (cgroupsPerQOS off).
func (m *Manager) PodDir(pod *v1.Pod) (string, bool) {
	n := m.PodCgroup(pod.UID, QOSClass(pod))
	if n == nil {
		return "", false
	}
	return m.Path(n), true
}

// SetPod writes the fields of rc that are set to pod's existing cgroup
// (an in-place resize: kubelet's SetPodCgroupConfig), and keeps the
// burstable QoS cgroup's shares following the pod's new CPU request. A
// quota of -1 removes the CPU limit. Without pod cgroups it does nothing.
func (m *Manager) SetPod(pod *v1.Pod, rc ResourceConfig) error {
	qos := QOSClass(pod)
	n := m.PodCgroup(pod.UID, qos)
	if n == nil {
		return nil
	}
	res := toResources(rc, cgroups.IsCgroup2UnifiedMode(), m.hugetlb)
	mgr, err := cgmanager.New(m.libctConfig(n, res))
	if err != nil {
		return fmt.Errorf("pod cgroup %s: %w", m.Path(n), err)
	}
	if err := mgr.Set(res); err != nil {
		return fmt.Errorf("pod cgroup %s: %w", m.Path(n), err)
	}
	if rc.CPUShares != nil {
		m.mu.Lock()
		e, ok := m.pods[pod.UID]
		if ok {
			e.milliCPU = podCPURequest(pod)
			m.pods[pod.UID] = e
		}
		m.mu.Unlock()
		if ok && qos == v1.PodQOSBurstable {
			poke(m.kick)
		}
	}
	return nil
}
