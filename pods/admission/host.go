package admission

import (
	"bytes"
	"os"

	"golang.org/x/sys/unix"
)

// HostSecurity is the node's SecurityOptions, read from the host: the
// running kernel (which sysctls are safe), AppArmor and SELinux, with the
// configured allowedUnsafeSysctls. The node advertises
// supplementalGroupsPolicy Strict (nodestatus.NodeFeatures), so it is on.
func HostSecurity(allowedUnsafeSysctls []string) SecurityOptions {
	var release string
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		release = unix.ByteSliceToString(u.Release[:])
	}
	return SecurityOptions{
		SafeSysctls:              SafeSysctls(release),
		AllowedUnsafeSysctls:     allowedUnsafeSysctls,
		AppArmorEnabled:          appArmorEnabled(),
		SELinuxEnabled:           seLinuxEnabled(),
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
