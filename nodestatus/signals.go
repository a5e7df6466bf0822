package nodestatus

import (
	"maps"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeagent/nodeagent/internal/evictionapi"
)

// readSignals records the imagefs and pid eviction signals in obs (the
// memory and nodefs ones come with the capacity, readCapacity).
func (m *Manager) readSignals(obs map[string]observation) {
	h := m.cfg.Host
	imagefs := m.cfg.ImageFSDir
	if fs, err := h.FS(imagefs); err != nil {
		m.log.Warn("reading imagefs stats", "path", imagefs, "err", err)
	} else {
		for _, sig := range []string{evictionapi.SignalImageFsAvailable, evictionapi.SignalContainerFsAvailable} {
			obs[sig] = observation{int64(fs.AvailableBytes), int64(fs.CapacityBytes)}
		}
		if fs.Inodes > 0 {
			for _, sig := range []string{evictionapi.SignalImageFsInodesFree, evictionapi.SignalContainerFsInodesFree} {
				obs[sig] = observation{int64(fs.InodesFree), int64(fs.Inodes)}
			}
		}
	}
	if limit, running, err := h.PIDs(); err != nil {
		m.log.Warn("reading pid stats", "err", err)
	} else {
		obs[evictionapi.SignalPIDAvailable] = observation{limit - running, limit}
	}
}

// observationOf joins measured signals with their thresholds and
// minimum reclaims.
func observationOf(now time.Time, c *config, obs map[string]observation, pressure map[v1.NodeConditionType]bool) *evictionapi.Observation {
	out := &evictionapi.Observation{Time: now, Signals: map[string]evictionapi.Observed{}, Pressure: maps.Clone(pressure)}
	for sig, o := range obs {
		out.Signals[sig] = evictionapi.Observed{Available: o.available, Capacity: o.capacity}
	}
	for _, t := range c.pressureThresholds() {
		o, ok := out.Signals[t.signal]
		if !ok {
			continue
		}
		v := t.value(o.Capacity)
		text := resource.NewQuantity(v, resource.BinarySI).String()
		if t.quantity != nil {
			text = t.quantity.String()
		}
		if t.soft {
			o.Soft, o.SoftText = v, text
		} else {
			o.Threshold, o.ThresholdText = v, text
		}
		if r, ok := c.minReclaim[t.signal]; ok {
			o.MinReclaim = r.value(o.Capacity)
		}
		out.Signals[t.signal] = o
	}
	return out
}

// publish keeps a sync's observation for Signals.
func (m *Manager) publish(now time.Time, obs map[string]observation, pressure map[v1.NodeConditionType]bool) {
	m.observed.Store(observationOf(now, m.cfg, obs, pressure))
	select {
	case m.updated <- struct{}{}:
	default: // coalesced: the reader takes the latest observation
	}
}

// SignalsUpdated receives a value after a status sync measured the
// signals (coalesced: one pending value at most), so the eviction manager
// acts on a crossing as soon as the node status sees it.
func (m *Manager) SignalsUpdated() <-chan struct{} { return m.updated }

// Pressure returns the pressure conditions the node reports as of the last
// status sync (nil before the first): what kubelet's eviction admit handler
// goes by. Safe to call concurrently with the manager's loop.
func (m *Manager) Pressure() map[v1.NodeConditionType]bool {
	if last := m.observed.Load(); last != nil {
		return last.Pressure
	}
	return nil
}

// Signals returns the eviction signals as the last status sync measured
// them when that is at most maxAge old, else measures the host now (the
// pressure conditions are then still the last sync's: only a sync moves
// them). Safe to call concurrently with the manager's loop.
func (m *Manager) Signals(maxAge time.Duration) evictionapi.Observation {
	now := m.clock.Now()
	last := m.observed.Load()
	if last != nil && now.Sub(last.Time) <= maxAge {
		return *last
	}
	obs := map[string]observation{}
	_, _, _ = m.readCapacity(obs) // what could not be read is missing from obs
	m.readSignals(obs)
	var pressure map[v1.NodeConditionType]bool
	if last != nil {
		pressure = last.Pressure
	}
	if met := thresholdsMet(m.cfg.pressureThresholds(), obs); len(met) > 0 {
		m.crossMu.Lock()
		if m.crossed == nil {
			m.crossed = map[v1.NodeConditionType]time.Time{}
		}
		for c := range met {
			m.crossed[c] = now
		}
		m.crossMu.Unlock()
	}
	return *observationOf(now, m.cfg, obs, pressure)
}

// mergeCrossings adds to a sync's verdict the thresholds Signals saw
// crossed since the last sync, so that a crossing the eviction manager
// acted on between two syncs still sets the pressure condition. The
// caller holds syncMu.
func (m *Manager) mergeCrossings(met map[v1.NodeConditionType]bool) {
	m.crossMu.Lock()
	defer m.crossMu.Unlock()
	for c, at := range m.crossed {
		if at.After(m.pressureSeen[c]) {
			met[c] = true
		}
	}
	clear(m.crossed)
}
