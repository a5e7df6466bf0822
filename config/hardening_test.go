package config

import (
	"errors"
	"strings"
	"testing"
)

// The fields CIS-hardened kubelet configurations set are read from both
// kinds of file without the unsupported warning, with kubelet v1beta1's
// defaults: maxOpenFiles 1000000 (0 in a kubelet file is the default),
// oomScoreAdj -999 (a pointer there: 0 is kept), the rest off.
func TestHardeningFields(t *testing.T) {
	type fields struct {
		Protect     bool
		MaxOpen     int64
		OOM         int32
		FailV1      bool
		PodsPerCore int32
	}
	of := func(c *NodeAgentConfiguration) fields {
		return fields{c.ProtectKernelDefaults, c.MaxOpenFiles, c.OOMScoreAdj, c.FailCgroupV1, c.PodsPerCore}
	}
	defaults := fields{false, 1000000, -999, false, 0}
	for _, tc := range []struct {
		desc, content string
		want          fields
	}{
		{"nodeagent defaults", hdr, defaults},
		{"kubelet defaults", kubeletHdr, defaults},
		{"kubelet zero values", kubeletHdr + "protectKernelDefaults: false\nmaxOpenFiles: 0\noomScoreAdj: 0\nfailCgroupV1: false\npodsPerCore: 0\n", fields{false, 1000000, 0, false, 0}},
		{"kubelet values", kubeletHdr + "protectKernelDefaults: true\nmaxOpenFiles: 65536\noomScoreAdj: -500\nfailCgroupV1: true\npodsPerCore: 10\n", fields{true, 65536, -500, true, 10}},
		{"nodeagent values", hdr + "protectKernelDefaults: true\nmaxOpenFiles: 0\noomScoreAdj: 1000\npodsPerCore: 3\n", fields{true, 0, 1000, false, 3}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, warnings, err := DecodeBytes("c.yaml", []byte(tc.content))
			if err != nil || len(warnings) != 0 {
				t.Fatalf("DecodeBytes: %v, warnings %q", err, warnings)
			}
			if got := of(cfg); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// Out-of-range values are refused with kubelet's wording.
func TestHardeningFieldsRefused(t *testing.T) {
	_, _, err := DecodeBytes("c.yaml", []byte(kubeletHdr+"maxOpenFiles: -1\noomScoreAdj: -1001\npodsPerCore: -2\n"))
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("DecodeBytes: %v, want a configuration error", err)
	}
	want := []string{
		"c.yaml:3: maxOpenFiles: Invalid value: -1: must not be a negative number",
		"c.yaml:4: oomScoreAdj: Invalid value: -1001: must be between -1000 and 1000, inclusive",
		"c.yaml:5: podsPerCore: Invalid value: -2: must not be a negative number",
	}
	if got := cerr.Lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// kubelet's nodestatus.MachineInfo rule: podsPerCore > 0 caps maxPods at
// podsPerCore × cores; it never raises it.
func TestPodCapacity(t *testing.T) {
	for _, tc := range []struct {
		maxPods, perCore int32
		cpus             int
		want             int32
	}{
		{110, 0, 2, 110},
		{110, 10, 2, 20},
		{110, 10, 64, 110},
		{110, 55, 2, 110},
		{30, 1, 1, 1},
		{110, 1 << 30, 4, 110}, // no overflow
	} {
		c := Default()
		c.MaxPods, c.PodsPerCore = tc.maxPods, tc.perCore
		if got := c.PodCapacity(tc.cpus); got != tc.want {
			t.Errorf("maxPods %d, podsPerCore %d, %d CPUs: %d, want %d", tc.maxPods, tc.perCore, tc.cpus, got, tc.want)
		}
	}
}

// failCgroupV1 refuses only cgroup v1 hosts, with kubelet's error.
func TestCheckCgroupV1(t *testing.T) {
	c := Default()
	if c.CheckCgroupV1(false) != nil || c.CheckCgroupV1(true) != nil {
		t.Error("default refused a host")
	}
	c.FailCgroupV1 = true
	if err := c.CheckCgroupV1(false); err == nil || err.Error() != "kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is in maintenance mode" {
		t.Errorf("cgroup v1: %v", err)
	}
	if err := c.CheckCgroupV1(true); err != nil {
		t.Errorf("cgroup v2: %v", err)
	}
}
