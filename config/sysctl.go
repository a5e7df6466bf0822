package config

import (
	"fmt"
	"regexp"
	"strings"

	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
)

// sysctlPattern is the API's sysctl pattern syntax (segments separated by
// "." or "/", optionally ending in "*").
var sysctlPattern = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]$`)

// validateSysctlPattern checks an allowedUnsafeSysctls entry as kubelet
// does at start: valid syntax and a namespaced sysctl (or prefix).
func validateSysctlPattern(p string) error {
	if len(p) > 253 || !sysctlPattern.MatchString(p) || strings.Count(p, "*") > 1 {
		return fmt.Errorf("sysctl %q must have at most 253 characters and be dot- or slash-separated lower-case segments, optionally ending in \"*\"", p)
	}
	if ns, s, _ := utilsysctl.GetNamespace(p); ns == utilsysctl.UnknownNamespace {
		return fmt.Errorf("the sysctls %q are not known to be namespaced", s)
	}
	return nil
}
