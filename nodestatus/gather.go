package nodestatus

import (
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/evictionapi"
)

// gather reads the host and calls the runtime once, filling m.in for the
// setters, and advances the pressure hysteresis. The caller holds syncMu.
func (m *Manager) gather(now time.Time) {
	in := inputs{now: now, observations: map[string]observation{}}
	h := m.cfg.Host

	// Start every runtime call at once; wait for all within one timeout.
	type waiter struct {
		done    <-chan struct{}
		started time.Time
		wait    func(<-chan struct{}, time.Time)
	}
	var waits []waiter
	if m.version != nil {
		d, s := m.version.start()
		waits = append(waits, waiter{d, s, m.version.wait})
	}
	if m.images != nil {
		d, s := m.images.start()
		waits = append(waits, waiter{d, s, m.images.wait})
	}
	if m.runtimeHealth != nil {
		d, s := m.runtimeHealth.start()
		waits = append(waits, waiter{d, s, m.runtimeHealth.wait})
	}
	if m.plegHealth != nil {
		d, s := m.plegHealth.start()
		waits = append(waits, waiter{d, s, m.plegHealth.wait})
	}

	var swapBytes int64
	in.capacity, swapBytes, in.capacityErr = m.readCapacity(in.observations)
	if f := m.cfg.DevicePlugins; f != nil {
		in.devCapacity, in.devAllocatable, in.devRemoved = f()
	}
	m.readSignals(in.observations)

	// Node info from the host.
	var infoErrs []error
	read := func(dst *string, f func() (string, error)) {
		v, err := f()
		if err != nil {
			infoErrs = append(infoErrs, err)
			return
		}
		*dst = v
	}
	read(&in.info.MachineID, h.MachineID)
	read(&in.info.SystemUUID, h.SystemUUID)
	read(&in.info.BootID, h.BootID)
	read(&in.info.KernelVersion, h.KernelVersion)
	read(&in.info.OSImage, h.OSImage)
	in.info.KubeletVersion = KubeletVersion(m.cfg.AgentVersion)
	// As kubelet (NodeSwap): the swap size when the host has swap.
	if swapBytes > 0 {
		in.info.Swap = &v1.NodeSwapStatus{Capacity: &swapBytes}
	}

	// Pressure with hysteresis.
	met := thresholdsMet(m.cfg.pressureThresholds(), in.observations)
	m.mergeCrossings(met)
	in.pressure = map[v1.NodeConditionType]bool{}
	for _, c := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		if met[c] {
			if m.pressureSeen[c].IsZero() || !PressureActive(now, m.pressureSeen[c], m.cfg.EvictionPressureTransitionPeriod) {
				m.log.Info("eviction threshold crossed", "condition", c)
			}
			m.pressureSeen[c] = now
		}
		in.pressure[c] = PressureActive(now, m.pressureSeen[c], m.cfg.EvictionPressureTransitionPeriod)
	}
	m.publish(now, in.observations, in.pressure)

	// Runtime answers.
	for _, w := range waits {
		w.wait(w.done, w.started)
	}
	grace := m.cfg.RuntimeGracePeriod
	if m.version != nil {
		v, ok, err := m.version.get(now, grace)
		if ok {
			in.info.ContainerRuntimeVersion = v[0] + "://" + v[1]
		}
		if err != nil {
			in.readyErrs = append(in.readyErrs, fmt.Errorf("container runtime is down: %w", err))
		}
	}
	if m.runtimeHealth != nil {
		if _, _, err := m.runtimeHealth.get(now, grace); err != nil {
			in.readyErrs = append(in.readyErrs, fmt.Errorf("container runtime not ready: %w", err))
		}
	}
	if m.plegHealth != nil {
		if _, _, err := m.plegHealth.get(now, grace); err != nil {
			in.readyErrs = append(in.readyErrs, fmt.Errorf("PLEG is not healthy: %w", err))
		}
	}
	if f := m.cfg.NetworkReady; f != nil {
		if err := f(); err != nil {
			in.readyErrs = append(in.readyErrs, err)
		}
	}
	if f := m.cfg.ShuttingDown; f != nil {
		if err := f(); err != nil {
			in.readyErrs = append(in.readyErrs, err)
		}
	}
	if f := m.cfg.CSINodeReady; f != nil {
		if err := f(); err != nil {
			in.readyErrs = append(in.readyErrs, err)
		}
	}
	if m.images != nil {
		in.images, in.imagesOK, in.imagesErr = m.images.get(now, grace)
		if in.imagesErr == nil && in.imagesOK {
			// The probe's freshest failure is still worth a log line.
			if _, _, e := m.images.get(now, 0); e != nil {
				m.log.Debug("listing images failed; reporting the last good list", "err", e)
			}
		}
	}
	in.infoErr = errors.Join(infoErrs...)
	m.in = in
}

// readCapacity reads the host's capacity (cpu, memory, pods,
// ephemeral-storage, hugepages-*) and the host's swap in bytes, and records
// the nodefs and memory eviction signals it reads on the way in obs.
func (m *Manager) readCapacity(obs map[string]observation) (v1.ResourceList, int64, error) {
	var swap int64 // the host's swap (SwapTotal), for nodeInfo.swap
	h := m.cfg.Host
	var capErrs []error
	capacity := v1.ResourceList{v1.ResourcePods: countQ(int64(m.cfg.MaxPods))}
	if n, err := h.NumCPU(); err != nil {
		capErrs = append(capErrs, err)
	} else {
		capacity[v1.ResourceCPU] = countQ(int64(n))
	}
	if mi, err := h.Meminfo(); err != nil {
		capErrs = append(capErrs, err)
	} else {
		capacity[v1.ResourceMemory] = bytesQ(int64(mi.Total))
		swap = int64(mi.SwapTotal)
		obs[evictionapi.SignalMemoryAvailable] = observation{available: int64(mi.Available()), capacity: int64(mi.Total)}
	}
	if fs, err := h.FS(m.cfg.RootDir); err != nil {
		capErrs = append(capErrs, fmt.Errorf("nodefs: %w", err))
	} else {
		capacity[v1.ResourceEphemeralStorage] = bytesQ(int64(fs.CapacityBytes))
		obs[evictionapi.SignalNodeFsAvailable] = observation{int64(fs.AvailableBytes), int64(fs.CapacityBytes)}
		if fs.Inodes > 0 {
			obs[evictionapi.SignalNodeFsInodesFree] = observation{int64(fs.InodesFree), int64(fs.Inodes)}
		}
	}
	if hp, err := h.HugePages(); err != nil {
		capErrs = append(capErrs, err)
	} else {
		for size, total := range hp {
			capacity[v1.ResourceName(HugePageResourceName(size))] = bytesQ(total)
		}
	}
	return capacity, swap, errors.Join(capErrs...)
}
