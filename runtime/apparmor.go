package runtime

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// The RuntimeDefault AppArmor profile: the profile containerd's
// contrib/apparmor generates and loads (docker's default profile), written
// without text/template. containerd renders it with a template, and
// text/template's method calls by name (reflect.Value.MethodByName) switch
// the linker's dead-code elimination of methods off for the whole binary
// (issue 16; hack/build.sh checks that it stays on).

// appArmorDir holds the abstractions and tunables the profile includes.
const appArmorDir = "/etc/apparmor.d"

// appArmorProfiles lists the profiles loaded in the kernel.
const appArmorProfiles = "/sys/kernel/security/apparmor/profiles"

// appArmorProfile is what the default profile is rendered from.
type appArmorProfile struct {
	Name          string
	Abi           string   // "abi/3.0" when the host's AppArmor has it
	Imports       []string // before the profile (tunables)
	InnerImports  []string // inside it (abstractions)
	DaemonProfile string   // the agent's own profile, allowed to signal
	RootlessKit   string   // rootlesskit's path, allowed to signal
}

// withDefaultAppArmorProfile loads the default profile under name unless
// it is loaded already, and confines the container with it.
func withDefaultAppArmorProfile(name string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if err := loadDefaultAppArmorProfile(name); err != nil {
			return fmt.Errorf("apparmor profile %s: %w", name, err)
		}
		s.Process.ApparmorProfile = name
		return nil
	}
}

func loadDefaultAppArmorProfile(name string) error {
	f, err := os.Open(appArmorProfiles)
	if err != nil {
		return err
	}
	loaded, err := appArmorProfileLoaded(f, name)
	f.Close()
	if err != nil || loaded {
		return err
	}
	tmp, err := os.CreateTemp(os.Getenv("XDG_RUNTIME_DIR"), name)
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = io.WriteString(tmp, hostAppArmorProfile(name).render())
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if out, err := exec.Command("apparmor_parser", "-Kr", tmp.Name()).CombinedOutput(); err != nil {
		return fmt.Errorf("apparmor_parser: %q: %w", strings.TrimSpace(string(out)), err)
	}
	return nil
}

// appArmorProfileLoaded reports whether the profiles list (the kernel's
// "name (mode)" lines) has name.
func appArmorProfileLoaded(r io.Reader, name string) (bool, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), name+" ") {
			return true, nil
		}
	}
	return false, sc.Err()
}

// hostAppArmorProfile fills the profile from the host, as containerd does.
func hostAppArmorProfile(name string) appArmorProfile {
	exists := func(p string) bool {
		_, err := os.Stat(filepath.Join(appArmorDir, p))
		return err == nil
	}
	p := appArmorProfile{Name: name}
	if exists("abi/3.0") {
		p.Abi = "abi/3.0"
	}
	if exists("tunables/global") {
		p.Imports = append(p.Imports, "#include <tunables/global>")
	} else {
		p.Imports = append(p.Imports, "@{PROC}=/proc/")
	}
	if exists("abstractions/base") {
		p.InnerImports = append(p.InnerImports, "#include <abstractions/base>")
	}
	current, _ := os.ReadFile("/proc/self/attr/current") // unreadable: unconfined
	p.DaemonProfile = appArmorProfileName(string(current))
	if path, err := exec.LookPath("rootlesskit"); err == nil {
		p.RootlessKit = path
	}
	return p
}

// appArmorProfileName strips the " (enforce)" mode suffix; none is unconfined.
func appArmorProfileName(current string) string {
	name, _, _ := strings.Cut(strings.TrimSpace(current), " ")
	if name == "" {
		return "unconfined"
	}
	return name
}

// render writes the profile, byte for byte what containerd v1.7's template
// produces for the same data (TestAppArmorProfileMatchesContainerd).
func (p appArmorProfile) render() string {
	var b strings.Builder
	b.WriteString("\n")
	if p.Abi != "" {
		b.WriteString("abi <" + p.Abi + ">,\n")
	}
	b.WriteString("\n")
	for _, v := range p.Imports {
		b.WriteString("\n" + v + "\n")
	}
	b.WriteString("\n\nprofile " + p.Name + " flags=(attach_disconnected,mediate_deleted) {\n")
	for _, v := range p.InnerImports {
		b.WriteString("\n  " + v + "\n")
	}
	b.WriteString(`

  network,
  capability,
  file,
  umount,
  # Host (privileged) processes may send signals to container processes.
  signal (receive) peer=unconfined,
  # runc may send signals to container processes.
  signal (receive) peer=runc,
  # crun may send signals to container processes.
  signal (receive) peer=crun,
  # Manager may send signals to container processes.
  signal (receive) peer=` + p.DaemonProfile + `,
  # Container processes may send signals amongst themselves.
  signal (send,receive) peer=` + p.Name + `,
`)
	if p.RootlessKit != "" {
		b.WriteString(`
  # https://github.com/containerd/nerdctl/issues/2730
  signal (receive) peer=` + p.RootlessKit + `,
`)
	}
	b.WriteString(`

  deny @{PROC}/* w,   # deny write for all files directly in /proc (not in a subdir)
  # deny write to files not in /proc/<number>/** or /proc/sys/**
  deny @{PROC}/{[^1-9],[^1-9][^0-9],[^1-9s][^0-9y][^0-9s],[^1-9][^0-9][^0-9][^0-9]*}/** w,
  deny @{PROC}/sys/[^k]** w,  # deny /proc/sys except /proc/sys/k* (effectively /proc/sys/kernel)
  deny @{PROC}/sys/kernel/{?,??,[^s][^h][^m]**} w,  # deny everything except shm* in /proc/sys/kernel/
  deny @{PROC}/sysrq-trigger rwklx,
  deny @{PROC}/mem rwklx,
  deny @{PROC}/kmem rwklx,
  deny @{PROC}/kcore rwklx,

  deny mount,

  deny /sys/[^f]*/** wklx,
  deny /sys/f[^s]*/** wklx,
  deny /sys/fs/[^c]*/** wklx,
  deny /sys/fs/c[^g]*/** wklx,
  deny /sys/fs/cg[^r]*/** wklx,
  deny /sys/firmware/** rwklx,
  deny /sys/devices/virtual/powercap/** rwklx,
  deny /sys/kernel/security/** rwklx,

  # allow processes within the container to trace each other,
  # provided all other LSM and yama setting allow it.
  ptrace (trace,tracedby,read,readby) peer=` + p.Name + `,
}
`)
	return b.String()
}
