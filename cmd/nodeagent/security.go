package main

import (
	"bytes"
	"os"

	"golang.org/x/sys/unix"

	"github.com/nodeagent/nodeagent/config"
	"github.com/nodeagent/nodeagent/pods"
	"github.com/nodeagent/nodeagent/pods/admission"
)

// podSecurity is the pod security settings from the configuration and the
// host: the running kernel (which sysctls are safe), AppArmor and SELinux.
func podSecurity(cfg *config.NodeAgentConfiguration) (pods.SecurityOptions, admission.SecurityOptions) {
	var release string
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		release = unix.ByteSliceToString(u.Release[:])
	}
	return pods.SecurityOptions{SeccompDefault: cfg.SeccompDefault},
		admission.SecurityOptions{
			SafeSysctls:          admission.SafeSysctls(release),
			AllowedUnsafeSysctls: cfg.AllowedUnsafeSysctls,
			AppArmorEnabled:      appArmorEnabled(),
			SELinuxEnabled:       seLinuxEnabled(),
			// The Node advertises it (nodestatus.NodeFeatures).
			StrictSupplementalGroups: true,
		}
}

// appArmorEnabled is runc's test: the module is loaded and enabled.
func appArmorEnabled() bool {
	b, err := os.ReadFile("/sys/module/apparmor/parameters/enabled")
	return err == nil && bytes.HasPrefix(b, []byte("Y"))
}

// seLinuxEnabled: selinuxfs is mounted (SELinux is on, enforcing or not).
func seLinuxEnabled() bool {
	_, err := os.Stat("/sys/fs/selinux/enforce")
	return err == nil
}
