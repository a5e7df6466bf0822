package runtime

import (
	"context"
	"slices"
	"testing"

	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/oci"
	"github.com/containerd/containerd/pkg/cap"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	utilptr "k8s.io/utils/ptr"
)

// specFor builds containerd's default spec with s applied (the options
// that do not read the rootfs).
func specFor(t *testing.T, s Security) *specs.Spec {
	t.Helper()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx := namespaces.WithNamespace(context.Background(), "test")
	sp, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "c"}, securitySpecOpts(s, allCaps)...)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

var allCaps = []string{"CAP_CHOWN", "CAP_KILL", "CAP_NET_ADMIN", "CAP_NET_BIND_SERVICE", "CAP_SYS_ADMIN"}

func hasNS(sp *specs.Spec, typ specs.LinuxNamespaceType) (bool, string) {
	for _, n := range sp.Linux.Namespaces {
		if n.Type == typ {
			return true, n.Path
		}
	}
	return false, ""
}

func TestSecuritySpecDefaults(t *testing.T) {
	sp := specFor(t, Security{})
	if sp.Process.NoNewPrivileges {
		t.Error("no_new_privs set by default; kubelet allows privilege escalation unless allowPrivilegeEscalation is false")
	}
	if sp.Linux.Seccomp != nil {
		t.Error("a seccomp filter by default; kubelet's default is Unconfined")
	}
	if !slices.Contains(sp.Linux.MaskedPaths, "/proc/interrupts") || !slices.Contains(sp.Linux.ReadonlyPaths, "/proc/sys") {
		t.Errorf("masked %v, read-only %v: want kubelet's defaults", sp.Linux.MaskedPaths, sp.Linux.ReadonlyPaths)
	}
	if !slices.Contains(sp.Process.Capabilities.Effective, "CAP_NET_RAW") || slices.Contains(sp.Process.Capabilities.Effective, "CAP_SYS_ADMIN") {
		t.Errorf("capabilities %v, want containerd's default set", sp.Process.Capabilities.Effective)
	}
	if sp.Root.Readonly {
		t.Error("read-only rootfs by default")
	}
	for _, typ := range []specs.LinuxNamespaceType{specs.PIDNamespace, specs.IPCNamespace} {
		if ok, _ := hasNS(sp, typ); !ok {
			t.Errorf("no private %s namespace", typ)
		}
	}
}

func TestSecuritySpecRestricted(t *testing.T) {
	sp := specFor(t, Security{
		NoNewPrivileges: true, CapDrop: []string{"ALL"}, CapAdd: []string{"NET_BIND_SERVICE"},
		Seccomp: SeccompRuntimeDefault, ReadOnlyRootfs: true,
	})
	if !sp.Process.NoNewPrivileges {
		t.Error("no_new_privs not set")
	}
	want := []string{"CAP_NET_BIND_SERVICE"}
	for name, set := range map[string][]string{"bounding": sp.Process.Capabilities.Bounding, "effective": sp.Process.Capabilities.Effective, "permitted": sp.Process.Capabilities.Permitted} {
		if !slices.Equal(set, want) {
			t.Errorf("%s capabilities %v, want %v (drop ALL, then add)", name, set, want)
		}
	}
	if sp.Linux.Seccomp == nil || sp.Linux.Seccomp.DefaultAction != specs.ActErrno || len(sp.Linux.Seccomp.Syscalls) == 0 {
		t.Errorf("seccomp %+v, want containerd's default profile", sp.Linux.Seccomp)
	}
	if !sp.Root.Readonly {
		t.Error("rootfs not read-only")
	}
}

func TestSecuritySpecCapabilities(t *testing.T) {
	sp := specFor(t, Security{CapAdd: []string{"ALL"}, CapDrop: []string{"cap_kill", "SYS_ADMIN"}})
	if want := []string{"CAP_CHOWN", "CAP_NET_ADMIN", "CAP_NET_BIND_SERVICE"}; !slices.Equal(sp.Process.Capabilities.Effective, want) {
		t.Errorf("capabilities %v, want %v", sp.Process.Capabilities.Effective, want)
	}
	sp = specFor(t, Security{CapAdd: []string{"NET_ADMIN"}, CapDrop: []string{"NET_RAW"}})
	if c := sp.Process.Capabilities.Effective; !slices.Contains(c, "CAP_NET_ADMIN") || slices.Contains(c, "CAP_NET_RAW") || !slices.Contains(c, "CAP_CHOWN") {
		t.Errorf("capabilities %v, want the default set + NET_ADMIN - NET_RAW", c)
	}
}

func TestSecuritySpecPrivileged(t *testing.T) {
	sp := specFor(t, Security{Privileged: true, Seccomp: SeccompRuntimeDefault, CapDrop: []string{"ALL"}})
	if current, _ := cap.Current(); !slices.Equal(sp.Process.Capabilities.Effective, current) {
		t.Errorf("capabilities %v, want all the agent has (%v)", sp.Process.Capabilities.Effective, current)
	}
	if len(sp.Linux.MaskedPaths) != 0 || len(sp.Linux.ReadonlyPaths) != 0 || sp.Linux.Seccomp != nil {
		t.Errorf("masked %v, read-only %v, seccomp %v: a privileged container has none", sp.Linux.MaskedPaths, sp.Linux.ReadonlyPaths, sp.Linux.Seccomp)
	}
	allowed := false
	for _, d := range sp.Linux.Resources.Devices {
		allowed = allowed || (d.Allow && d.Access == "rwm" && d.Type == "")
	}
	if !allowed {
		t.Errorf("devices cgroup %+v, want every device allowed", sp.Linux.Resources.Devices)
	}
	for _, m := range sp.Mounts {
		if m.Type == "sysfs" && slices.Contains(m.Options, "ro") {
			t.Error("sysfs read-only in a privileged container")
		}
	}
}

func TestSecuritySpecNamespacesAndSysctls(t *testing.T) {
	sp := specFor(t, Security{HostPID: true, HostIPC: true, UnmaskedProc: true, Sysctls: map[string]string{"net.ipv4.ip_local_port_range": "1024 2048"}})
	for _, typ := range []specs.LinuxNamespaceType{specs.PIDNamespace, specs.IPCNamespace} {
		if ok, _ := hasNS(sp, typ); ok {
			t.Errorf("a private %s namespace with host%s", typ, typ)
		}
	}
	for _, m := range sp.Mounts {
		if m.Destination == "/dev/shm" && m.Source != "/dev/shm" {
			t.Errorf("/dev/shm %+v, want the host's with hostIPC", m)
		}
	}
	if sp.Linux.Sysctl["net.ipv4.ip_local_port_range"] != "1024 2048" {
		t.Errorf("sysctls %v", sp.Linux.Sysctl)
	}
	if len(sp.Linux.MaskedPaths) != 0 {
		t.Errorf("masked paths %v with procMount Unmasked", sp.Linux.MaskedPaths)
	}
	sp = specFor(t, Security{PIDNSPath: "/proc/42/ns/pid"})
	if ok, p := hasNS(sp, specs.PIDNamespace); !ok || p != "/proc/42/ns/pid" {
		t.Errorf("pid namespace %v %q, want to join /proc/42/ns/pid", ok, p)
	}
}

func TestSecurityValidate(t *testing.T) {
	bad := []Security{
		{Seccomp: SeccompLocalhost, SeccompProfilePath: "rel.json"},
		{Seccomp: "Bogus"},
		{HostPID: true, PIDNSPath: "/proc/1/ns/pid"},
		{RunAsUser: utilptr.To[int64](-1)},
		{SupplementalGroups: []int64{1 << 40}},
	}
	for _, s := range bad {
		if err := s.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", s)
		}
	}
}

func TestParseImageUser(t *testing.T) {
	for _, tt := range []struct {
		in   string
		uid  *int64
		name string
	}{
		{"", utilptr.To[int64](0), ""},
		{"0", utilptr.To[int64](0), ""},
		{"1000:1000", utilptr.To[int64](1000), ""},
		{"nobody", nil, "nobody"},
		{"app:staff", nil, "app"},
	} {
		uid, name := ParseImageUser(tt.in)
		if (uid == nil) != (tt.uid == nil) || (uid != nil && *uid != *tt.uid) || name != tt.name {
			t.Errorf("ParseImageUser(%q) = %v, %q; want %v, %q", tt.in, uid, name, tt.uid, tt.name)
		}
	}
}
