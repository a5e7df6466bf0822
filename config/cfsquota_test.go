package config

import (
	"strings"
	"testing"
	"time"
)

// cpuCFSQuota and cpuCFSQuotaPeriod are read from both kinds of file with
// kubelet's defaults (true, 100ms); a period other than 100ms is refused
// with kubelet's message, and so is the gate that would allow it.
func TestCPUCFSQuotaFields(t *testing.T) {
	for _, tc := range []struct {
		desc, content string
		quota         bool
	}{
		{"nodeagent defaults", hdr, true},
		{"kubelet defaults", kubeletHdr, true},
		{"nodeagent off", hdr + "cpuCFSQuota: false\n", false},
		{"kubelet off", kubeletHdr + "cpuCFSQuota: false\ncpuCFSQuotaPeriod: 100ms\n", false},
		{"kubelet on", kubeletHdr + "cpuCFSQuota: true\n", true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, warnings, err := DecodeBytes("c.yaml", []byte(tc.content))
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) > 0 {
				t.Errorf("warnings: %q", warnings)
			}
			if cfg.CPUCFSQuota != tc.quota || cfg.CPUCFSQuotaPeriod.Duration != 100*time.Millisecond {
				t.Errorf("cpuCFSQuota %v, cpuCFSQuotaPeriod %v; want %v, 100ms", cfg.CPUCFSQuota, cfg.CPUCFSQuotaPeriod.Duration, tc.quota)
			}
		})
	}
	for _, tc := range []struct{ desc, content, want string }{
		{"kubelet period", kubeletHdr + "cpuCFSQuotaPeriod: 50ms\n",
			`cpuCFSQuotaPeriod: Invalid value: "50ms": requires feature gate CustomCPUCFSQuotaPeriod`},
		{"kubelet zero period", kubeletHdr + "cpuCFSQuotaPeriod: 0s\n",
			`cpuCFSQuotaPeriod: Invalid value: "0s": requires feature gate CustomCPUCFSQuotaPeriod`},
		{"nodeagent period", hdr + "cpuCFSQuotaPeriod: 200ms\n",
			`cpuCFSQuotaPeriod: Invalid value: "200ms": requires feature gate CustomCPUCFSQuotaPeriod`},
		{"gate", kubeletHdr + "featureGates:\n  CustomCPUCFSQuotaPeriod: true\ncpuCFSQuotaPeriod: 50ms\n",
			"featureGates.CustomCPUCFSQuotaPeriod"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, _, err := DecodeBytes("c.yaml", []byte(tc.content))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
