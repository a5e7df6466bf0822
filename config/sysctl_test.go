package config

import "testing"

func TestValidateSysctlPattern(t *testing.T) {
	for _, ok := range []string{"net.core.somaxconn", "net.*", "kernel.msg*", "net/ipv4/ip_forward", "fs.mqueue.*", "kernel.shm_rmid_forced"} {
		if err := validateSysctlPattern(ok); err != nil {
			t.Errorf("validateSysctlPattern(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "kernel.panic", "Net.core", "net..x", "net.*.x", "*", "vm.swappiness"} {
		if err := validateSysctlPattern(bad); err == nil {
			t.Errorf("validateSysctlPattern(%q) = nil, want an error", bad)
		}
	}
}
