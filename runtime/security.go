package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/contrib/seccomp"
	"github.com/containerd/containerd/mount"
	"github.com/containerd/containerd/oci"
	"github.com/containerd/containerd/pkg/cap"
	"github.com/containerd/containerd/platforms"
	"github.com/containerd/continuity/fs"
	"github.com/moby/sys/user"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// SeccompType is a container's seccomp profile kind (the API's names).
type SeccompType string

const (
	// SeccompUnconfined: no seccomp filter (kubelet's default when
	// seccompDefault is off).
	SeccompUnconfined SeccompType = "Unconfined"
	// SeccompRuntimeDefault: containerd's default profile.
	SeccompRuntimeDefault SeccompType = "RuntimeDefault"
	// SeccompLocalhost: the JSON profile at Security.SeccompProfilePath.
	SeccompLocalhost SeccompType = "Localhost"
)

// Security is the Linux security of one container, as kubelet hands it to
// a CRI runtime (LinuxContainerSecurityContext), already merged from the
// pod's and the container's securityContext. The zero value is a container
// as nodeagent ran them before: the image's user, containerd's default
// capabilities, no seccomp filter, private PID and IPC namespaces, and
// privilege escalation allowed (no_new_privs off), as kubelet.
type Security struct {
	// RunAsUser replaces the image's user; its primary group is the one
	// /etc/passwd of the image gives it (else 0), as containerd's WithUser.
	RunAsUser *int64
	// RunAsGroup replaces the primary group.
	RunAsGroup *int64
	// SupplementalGroups are added to the process's groups, after the
	// groups /etc/group of the image lists the user in.
	SupplementalGroups []int64
	// StrictGroups (supplementalGroupsPolicy Strict) leaves out the groups
	// of the image's /etc/group.
	StrictGroups bool

	Privileged      bool
	NoNewPrivileges bool
	ReadOnlyRootfs  bool
	// CapAdd and CapDrop change containerd's default capability set; names
	// are the API's ("NET_ADMIN", with or without "CAP_"), "ALL" means every
	// capability the kernel knows. Drops apply after adds, "ALL" first.
	CapAdd, CapDrop []string
	// UnmaskedProc leaves /proc without masked and read-only paths
	// (procMount Unmasked).
	UnmaskedProc bool

	Seccomp            SeccompType // "" is Unconfined
	SeccompProfilePath string      // SeccompLocalhost: absolute path of the profile
	// AppArmorProfile is the name of a loaded AppArmor profile ("" none);
	// AppArmorRuntimeDefault loads and applies containerd's default
	// profile instead. Only on hosts with AppArmor.
	AppArmorProfile        string
	AppArmorRuntimeDefault bool

	// Sysctls are namespaced kernel parameters set in the container's
	// namespaces (dotted names).
	Sysctls map[string]string

	// HostPID and HostIPC share the host's PID and IPC namespaces.
	HostPID, HostIPC bool
	// PIDNSPath, when set, is a PID namespace file (/proc/<pid>/ns/pid of
	// a process of the pod) the container joins (shareProcessNamespace).
	PIDNSPath string
}

// Validate reports problems of a Security, naming the field.
func (s *Security) Validate() error {
	var errs []error
	if s.Seccomp == SeccompLocalhost && !filepath.IsAbs(s.SeccompProfilePath) {
		errs = append(errs, fmt.Errorf("seccompProfilePath %q must be absolute", s.SeccompProfilePath))
	}
	switch s.Seccomp {
	case "", SeccompUnconfined, SeccompRuntimeDefault, SeccompLocalhost:
	default:
		errs = append(errs, fmt.Errorf("seccomp %q is not Unconfined, RuntimeDefault or Localhost", s.Seccomp))
	}
	if s.HostPID && s.PIDNSPath != "" {
		errs = append(errs, errors.New("hostPID and pidNSPath are mutually exclusive"))
	}
	if s.PIDNSPath != "" && !filepath.IsAbs(s.PIDNSPath) {
		errs = append(errs, fmt.Errorf("pidNSPath %q must be absolute", s.PIDNSPath))
	}
	for _, id := range append([]*int64{s.RunAsUser, s.RunAsGroup}, ptrs(s.SupplementalGroups)...) {
		if id != nil && (*id < 0 || *id > maxID) {
			errs = append(errs, fmt.Errorf("user or group ID %d is out of range [0, %d]", *id, maxID))
		}
	}
	return errors.Join(errs...)
}

// maxID is runc's limit on user and group IDs (containerd's too).
const maxID = 1<<31 - 1

func ptrs(v []int64) []*int64 {
	out := make([]*int64, len(v))
	for i := range v {
		out[i] = &v[i]
	}
	return out
}

// appArmorDefaultProfile is the name nodeagent loads containerd's default
// AppArmor profile under.
const appArmorDefaultProfile = "nodeagent-default"

// kubelet's default masked paths (pkg/securitycontext, kept in sync with
// moby): containerd's plus /proc/interrupts and the CPUs' thermal_throttle.
var defaultMaskedPaths = sync.OnceValue(func() []string {
	p := []string{
		"/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
		"/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
	}
	tt, _ := filepath.Glob("/sys/devices/system/cpu/cpu[0-9]*/thermal_throttle")
	sort.Strings(tt)
	return append(p, tt...)
})

var defaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}

// capName is the OCI name of an API capability name.
func capName(c string) string {
	c = strings.ToUpper(c)
	if !strings.HasPrefix(c, "CAP_") {
		c = "CAP_" + c
	}
	return c
}

// securitySpecOpts maps s onto spec options applied after the image's
// config, as containerd's CRI plugin does for the same CRI fields. allCaps
// are the capabilities "ALL" stands for. The user options (RunAsUser,
// groups) are separate: see withUser.
func securitySpecOpts(s Security, allCaps []string) []oci.SpecOpts {
	opts := []oci.SpecOpts{func(_ context.Context, _ oci.Client, _ *containers.Container, sp *specs.Spec) error {
		sp.Process.NoNewPrivileges = s.NoNewPrivileges
		if s.UnmaskedProc {
			sp.Linux.MaskedPaths, sp.Linux.ReadonlyPaths = []string{}, []string{}
		} else {
			sp.Linux.MaskedPaths = slices.Clone(defaultMaskedPaths())
			sp.Linux.ReadonlyPaths = slices.Clone(defaultReadonlyPaths)
		}
		// Ambient capabilities stay empty: non-root plus capabilities is
		// not defined by Kubernetes (containerd clears them too).
		sp.Process.Capabilities.Ambient = nil
		return nil
	}}
	if slices.ContainsFunc(s.CapAdd, isAll) {
		opts = append(opts, oci.WithCapabilities(allCaps))
	}
	if slices.ContainsFunc(s.CapDrop, isAll) {
		opts = append(opts, oci.WithCapabilities(nil))
	}
	var add, drop []string
	for _, c := range s.CapAdd {
		if !isAll(c) {
			add = append(add, capName(c))
		}
	}
	for _, c := range s.CapDrop {
		if !isAll(c) {
			drop = append(drop, capName(c))
		}
	}
	if len(add) > 0 {
		opts = append(opts, oci.WithAddedCapabilities(add))
	}
	if len(drop) > 0 {
		opts = append(opts, oci.WithDroppedCapabilities(drop))
	}
	if s.Privileged {
		// Every capability the agent has (containerd's WithPrivileged),
		// which may be fewer than the kernel knows.
		opts = append(opts, oci.WithAllCurrentCapabilities, oci.WithMaskedPaths(nil), oci.WithReadonlyPaths(nil),
			oci.WithWriteableSysfs, oci.WithWriteableCgroupfs, oci.WithApparmorProfile(""),
			oci.WithSeccompUnconfined, oci.WithHostDevices, oci.WithAllDevicesAllowed)
	}
	if s.ReadOnlyRootfs {
		opts = append(opts, oci.WithRootFSReadonly())
	}
	if s.HostPID {
		opts = append(opts, oci.WithHostNamespace(specs.PIDNamespace))
	} else if s.PIDNSPath != "" {
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.PIDNamespace, Path: s.PIDNSPath}))
	}
	if s.HostIPC {
		opts = append(opts, oci.WithHostNamespace(specs.IPCNamespace), withHostDevShm)
	}
	if len(s.Sysctls) > 0 {
		opts = append(opts, func(_ context.Context, _ oci.Client, _ *containers.Container, sp *specs.Spec) error {
			if sp.Linux.Sysctl == nil {
				sp.Linux.Sysctl = map[string]string{}
			}
			for k, v := range s.Sysctls {
				sp.Linux.Sysctl[k] = v
			}
			return nil
		})
	}
	// Seccomp last: the default profile depends on the capabilities. A
	// privileged container runs unconfined whatever its profile (as
	// containerd).
	if !s.Privileged {
		switch s.Seccomp {
		case SeccompRuntimeDefault:
			opts = append(opts, seccomp.WithDefaultProfile())
		case SeccompLocalhost:
			opts = append(opts, seccomp.WithProfile(s.SeccompProfilePath))
		}
		switch {
		case s.AppArmorRuntimeDefault:
			opts = append(opts, withDefaultAppArmorProfile(appArmorDefaultProfile))
		case s.AppArmorProfile != "":
			opts = append(opts, oci.WithApparmorProfile(s.AppArmorProfile))
		}
	}
	return opts
}

func isAll(c string) bool { return strings.EqualFold(c, "ALL") }

// withHostDevShm makes /dev/shm the host's (hostIPC), as containerd.
func withHostDevShm(_ context.Context, _ oci.Client, _ *containers.Container, sp *specs.Spec) error {
	for i, m := range sp.Mounts {
		if m.Destination == "/dev/shm" {
			sp.Mounts[i] = specs.Mount{Destination: "/dev/shm", Type: "bind", Source: "/dev/shm", Options: []string{"rbind", "rw"}}
		}
	}
	return nil
}

// needsUser reports whether the user and groups the image config gave
// the process must be recomputed.
func (s *Security) needsUser() bool {
	return s.RunAsUser != nil || s.RunAsGroup != nil || len(s.SupplementalGroups) > 0 || s.StrictGroups
}

// withUser sets the process's user and groups from s after the image's
// config set them: uid RunAsUser (else the image's), gid RunAsGroup (else
// the /etc/passwd group of RunAsUser, else the image's), groups the gid,
// the groups /etc/group lists the user in (unless StrictGroups), then
// SupplementalGroups. The rootfs is mounted (read-only, once) only when
// RunAsUser must be looked up.
func withUser(s Security) oci.SpecOpts {
	return func(ctx context.Context, client oci.Client, c *containers.Container, sp *specs.Spec) error {
		u := &sp.Process.User
		oldGID := u.GID
		groups := u.AdditionalGids
		if s.RunAsUser != nil {
			uid := uint32(*s.RunAsUser)
			var err error
			var gid uint32
			gid, groups, err = lookupUser(ctx, client, c, uid, s.StrictGroups)
			if err != nil {
				return err
			}
			u.UID, u.GID, oldGID = uid, gid, gid
		}
		if s.RunAsGroup != nil {
			u.GID = uint32(*s.RunAsGroup)
		}
		out := []uint32{u.GID}
		if !s.StrictGroups {
			for _, g := range groups {
				if g != oldGID && !slices.Contains(out, g) {
					out = append(out, g)
				}
			}
		}
		for _, g := range s.SupplementalGroups {
			if !slices.Contains(out, uint32(g)) {
				out = append(out, uint32(g))
			}
		}
		u.AdditionalGids = out
		return nil
	}
}

// lookupUser reads uid's primary group (0 when /etc/passwd has no such
// user) and, unless strict, the groups /etc/group lists its name in, from
// the container's rootfs.
func lookupUser(ctx context.Context, client oci.Client, c *containers.Container, uid uint32, strict bool) (uint32, []uint32, error) {
	var gid uint32
	var groups []uint32
	read := func(root string) error {
		pw, err := fs.RootPath(root, "/etc/passwd")
		if err != nil {
			return err
		}
		users, err := user.ParsePasswdFileFilter(pw, func(u user.User) bool { return u.Uid == int(uid) })
		if err != nil || len(users) == 0 {
			return nil // no /etc/passwd or no entry: gid 0, no groups (as containerd)
		}
		gid = uint32(users[0].Gid)
		if strict {
			return nil
		}
		name := users[0].Name
		gr, err := fs.RootPath(root, "/etc/group")
		if err != nil {
			return err
		}
		gs, err := user.ParseGroupFileFilter(gr, func(g user.Group) bool { return slices.Contains(g.List, name) })
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return fmt.Errorf("read /etc/group: %w", err)
		}
		for _, g := range gs {
			groups = append(groups, uint32(g.Gid))
		}
		return nil
	}
	mounts, err := client.SnapshotService(c.Snapshotter).Mounts(ctx, c.SnapshotKey)
	if err != nil {
		return 0, nil, err
	}
	if err := mount.WithReadonlyTempMount(ctx, mounts, read); err != nil {
		return 0, nil, err
	}
	return gid, groups, nil
}

// allCapabilities is what "ALL" and privileged grant: every capability the
// running kernel knows (containerd's CRI uses the same list).
var allCapabilities = sync.OnceValue(cap.Known)

// imageUsers caches image config users by config digest: images are
// immutable, so the answer never changes.
type imageUsers struct {
	mu sync.Mutex
	m  map[string]string
}

// ImageUser returns the user of an image's config ("" when it sets none):
// "uid", "name", "uid:gid", ... as the image has it. kubelet reads it
// (from CRI's image status) to enforce runAsNonRoot.
func (r *Runtime) ImageUser(ctx context.Context, ref string) (string, error) {
	ctx, cancel := r.callCtx(ctx)
	defer cancel()
	rec, err := r.lookupImage(ctx, ref)
	if err != nil {
		return "", err
	}
	key := rec.Target.Digest.String()
	r.users.mu.Lock()
	u, ok := r.users.m[key]
	r.users.mu.Unlock()
	if ok {
		return u, nil
	}
	img := containerd.NewImageWithPlatform(r.client, rec, platforms.Default())
	cfg, err := img.Spec(ctx)
	if err != nil {
		return "", fmt.Errorf("runtime: image %s config: %w", ref, convertErr(err))
	}
	r.users.mu.Lock()
	if r.users.m == nil {
		r.users.m = map[string]string{}
	}
	r.users.m[key] = cfg.Config.User
	r.users.mu.Unlock()
	return cfg.Config.User, nil
}

// ParseImageUser splits an image config user as CRI runtimes do: a numeric
// user (before any ":group") is a uid; anything else a user name. An empty
// user is root (uid 0).
func ParseImageUser(s string) (uid *int64, name string) {
	if s == "" {
		return new(int64), ""
	}
	u, _, _ := strings.Cut(s, ":")
	if n, err := strconv.ParseInt(u, 10, 64); err == nil {
		return &n, ""
	}
	return nil, u
}
