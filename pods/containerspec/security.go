package containerspec

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"

	"github.com/nodeagent/nodeagent/runtime"
)

// SecurityOptions are the node settings that shape containers' security
// (kubelet's configuration fields of the same meaning).
type SecurityOptions struct {
	// SeccompDefault runs containers without a seccomp profile with the
	// runtime's default profile instead of unconfined (seccompDefault).
	SeccompDefault bool
	// SeccompProfileRoot is where Localhost seccomp profiles are
	// (kubelet's <rootDir>/seccomp).
	SeccompProfileRoot string
}

// ImageUsers reads the user an image's config runs as; *runtime.Runtime
// implements it.
type ImageUsers interface {
	ImageUser(ctx context.Context, ref string) (string, error)
}

var _ ImageUsers = (*runtime.Runtime)(nil)

// effectiveSecurityContext merges the pod's securityContext into the
// container's: the container's fields win (kubelet's
// DetermineEffectiveSecurityContext). Never nil.
func effectiveSecurityContext(pod *v1.Pod, c *v1.Container) v1.SecurityContext {
	var sc v1.SecurityContext
	if c.SecurityContext != nil {
		sc = *c.SecurityContext
	}
	if p := pod.Spec.SecurityContext; p != nil {
		if sc.RunAsUser == nil {
			sc.RunAsUser = p.RunAsUser
		}
		if sc.RunAsGroup == nil {
			sc.RunAsGroup = p.RunAsGroup
		}
		if sc.RunAsNonRoot == nil {
			sc.RunAsNonRoot = p.RunAsNonRoot
		}
		if sc.SeccompProfile == nil {
			sc.SeccompProfile = p.SeccompProfile
		}
		if sc.AppArmorProfile == nil {
			sc.AppArmorProfile = p.AppArmorProfile
		}
	}
	return sc
}

// containerSecurity maps a container's effective security context and its
// pod's onto what the runtime applies, with kubelet's semantics:
// fsGroup then supplementalGroups join the process's groups;
// allowPrivilegeEscalation false sets no_new_privs (unset allows
// escalation); the seccomp profile is the container's, else the pod's,
// else RuntimeDefault with seccompDefault and Unconfined without; sysctls
// are the pod's (admission checked them).
func containerSecurity(pod *v1.Pod, c *v1.Container, o SecurityOptions) (runtime.Security, error) {
	sc := effectiveSecurityContext(pod, c)
	s := runtime.Security{
		RunAsUser:      sc.RunAsUser,
		RunAsGroup:     sc.RunAsGroup,
		Privileged:     sc.Privileged != nil && *sc.Privileged,
		ReadOnlyRootfs: sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem,
		UnmaskedProc:   sc.ProcMount != nil && *sc.ProcMount == v1.UnmaskedProcMount,
		HostPID:        pod.Spec.HostPID,
		HostIPC:        pod.Spec.HostIPC,
	}
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		s.NoNewPrivileges = true
	}
	if caps := sc.Capabilities; caps != nil {
		for _, a := range caps.Add {
			s.CapAdd = append(s.CapAdd, string(a))
		}
		for _, d := range caps.Drop {
			s.CapDrop = append(s.CapDrop, string(d))
		}
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.FSGroup != nil {
			s.SupplementalGroups = append(s.SupplementalGroups, *psc.FSGroup)
		}
		s.SupplementalGroups = append(s.SupplementalGroups, psc.SupplementalGroups...)
		s.StrictGroups = psc.SupplementalGroupsPolicy != nil && *psc.SupplementalGroupsPolicy == v1.SupplementalGroupsPolicyStrict
		if len(psc.Sysctls) > 0 {
			s.Sysctls = make(map[string]string, len(psc.Sysctls))
			for _, sy := range psc.Sysctls {
				s.Sysctls[utilsysctl.NormalizeName(sy.Name)] = sy.Value
			}
		}
	}
	switch p := sc.SeccompProfile; {
	case p == nil && o.SeccompDefault:
		s.Seccomp = runtime.SeccompRuntimeDefault
	case p == nil || p.Type == v1.SeccompProfileTypeUnconfined:
		s.Seccomp = runtime.SeccompUnconfined
	case p.Type == v1.SeccompProfileTypeRuntimeDefault:
		s.Seccomp = runtime.SeccompRuntimeDefault
	case p.Type == v1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return runtime.Security{}, errors.New("localhostProfile must be set if seccompProfile type is Localhost.")
		}
		s.Seccomp = runtime.SeccompLocalhost
		s.SeccompProfilePath = filepath.Join(o.SeccompProfileRoot, *p.LocalhostProfile)
	default:
		return runtime.Security{}, fmt.Errorf("unknown seccompProfile type %q", p.Type)
	}
	// Admission refused AppArmor profiles on hosts without AppArmor;
	// Unconfined needs nothing.
	if p := sc.AppArmorProfile; p != nil {
		switch p.Type {
		case v1.AppArmorProfileTypeRuntimeDefault:
			s.AppArmorRuntimeDefault = true
		case v1.AppArmorProfileTypeLocalhost:
			if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
				return runtime.Security{}, errors.New("missing localhost apparmor profile name")
			}
			s.AppArmorProfile = *p.LocalhostProfile
		}
	}
	return s, nil
}

// needsImageUser reports whether runAsNonRoot must be checked against the
// image's user: it is set and no runAsUser says who runs.
func needsImageUser(pod *v1.Pod, c *v1.Container) bool {
	sc := effectiveSecurityContext(pod, c)
	return sc.RunAsNonRoot != nil && *sc.RunAsNonRoot && sc.RunAsUser == nil
}

// verifyRunAsNonRoot is kubelet's runAsNonRoot check, with its messages:
// the container must not run as uid 0, and an image user that is a name
// cannot be verified. imageUser is the image config's user (used only
// without runAsUser).
func verifyRunAsNonRoot(pod *v1.Pod, c *v1.Container, imageUser string) error {
	sc := effectiveSecurityContext(pod, c)
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		return nil
	}
	if sc.RunAsUser != nil {
		if *sc.RunAsUser == 0 {
			return fmt.Errorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", podDesc(pod), c.Name)
		}
		return nil
	}
	uid, name := runtime.ParseImageUser(imageUser)
	switch {
	case uid != nil && *uid == 0:
		return fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", podDesc(pod), c.Name)
	case uid == nil && name != "":
		return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)", name, podDesc(pod), c.Name)
	}
	return nil
}

// security is container c's runtime.Security; it refuses a container
// runAsNonRoot forbids (images reads the image's user when no runAsUser
// says who runs). Its errors are configuration errors (kubelet's
// CreateContainerConfigError).
func security(ctx context.Context, pod *v1.Pod, c *v1.Container, o SecurityOptions, images ImageUsers) (runtime.Security, error) {
	sec, err := containerSecurity(pod, c, o)
	if err != nil {
		return runtime.Security{}, err
	}
	if needsImageUser(pod, c) {
		if images == nil {
			return runtime.Security{}, errors.New("cannot read the image's user to verify runAsNonRoot")
		}
		u, err := images.ImageUser(ctx, c.Image)
		if err != nil {
			return runtime.Security{}, fmt.Errorf("image user: %w", err)
		}
		if err := verifyRunAsNonRoot(pod, c, u); err != nil {
			return runtime.Security{}, err
		}
	} else if err := verifyRunAsNonRoot(pod, c, ""); err != nil {
		return runtime.Security{}, err
	}
	return sec, nil
}

// podDesc names a pod in messages as kubelet's format.Pod does.
func podDesc(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}
