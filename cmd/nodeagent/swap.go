package main

import (
	"log/slog"
	"os"

	"github.com/opencontainers/cgroups"

	"github.com/nodeagent/nodeagent/cm"
	"github.com/nodeagent/nodeagent/config"
	"github.com/nodeagent/nodeagent/pods/volume"
)

// checkSwap is kubelet's start-up check: with failSwapOn (its default) a
// host with swap on is refused with kubelet's error; without it the agent
// starts and memorySwap decides what containers may use.
func checkSwap(failSwapOn bool, swapOn func() (bool, error)) error {
	on, err := swapOn()
	if err != nil {
		return err
	}
	if on && failSwapOn {
		return cm.ErrSwapOn
	}
	return nil
}

// swapConfig is memorySwap with what the host has: the swap controller
// (where kubelet looks for it), the cgroup version and the swap size.
func swapConfig(cfg *config.NodeAgentConfiguration, swapTotal int64, log *slog.Logger) cm.Swap {
	unified := cgroups.IsCgroup2UnifiedMode()
	self, _ := os.ReadFile("/proc/self/cgroup")
	s := cm.Swap{
		Controller: cm.SwapControllerAvailable("/sys/fs/cgroup", unified, self),
		Unified:    unified,
		Limited:    cfg.MemorySwap.SwapBehavior == config.SwapBehaviorLimitedSwap,
		Capacity:   swapTotal,
	}
	behavior := cfg.MemorySwap.SwapBehavior
	if behavior == "" {
		behavior = config.SwapBehaviorNoSwap
	}
	log.Info("containers' swap", "swapBehavior", behavior, "applied", s.Applies(), "swapController", s.Controller, "cgroupV2", unified, "hostSwapBytes", swapTotal)
	if swapTotal > 0 && !volume.TmpfsNoswap() {
		// kubelet's message (an Event PossibleMemoryBackedVolumesOnDisk there).
		log.Warn("The tmpfs noswap option is not supported. Memory-backed volumes (e.g. secrets, emptyDirs, etc.) might be swapped to disk and should no longer be considered secure.")
	}
	if s.Limited && (!s.Controller || !unified) {
		log.Warn("memorySwap.swapBehavior LimitedSwap needs cgroup v2 and its swap controller: containers get no swap (NoSwap), as with kubelet", "cgroupV2", unified, "swapController", s.Controller)
	}
	return s
}
