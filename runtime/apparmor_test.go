package runtime

import (
	"strings"
	"testing"
	"text/template"
)

// containerdAppArmorTemplate is containerd v1.7.35's contrib/apparmor
// template (Apache-2.0), the reference the agent's renderer must match.
const containerdAppArmorTemplate = `
{{if .Abi}}abi <{{.Abi}}>,
{{end}}
{{range $value := .Imports}}
{{$value}}
{{end}}

profile {{.Name}} flags=(attach_disconnected,mediate_deleted) {
{{range $value := .InnerImports}}
  {{$value}}
{{end}}

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
  signal (receive) peer={{.DaemonProfile}},
  # Container processes may send signals amongst themselves.
  signal (send,receive) peer={{.Name}},
{{if .RootlessKit}}
  # https://github.com/containerd/nerdctl/issues/2730
  signal (receive) peer={{.RootlessKit}},
{{end}}

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
  ptrace (trace,tracedby,read,readby) peer={{.Name}},
}
`

func TestAppArmorProfileMatchesContainerd(t *testing.T) {
	tmpl := template.Must(template.New("apparmor").Parse(containerdAppArmorTemplate))
	for _, p := range []appArmorProfile{
		{Name: "nodeagent-default", Imports: []string{"@{PROC}=/proc/"}, DaemonProfile: "unconfined"},
		{Name: "nodeagent-default", Abi: "abi/3.0", Imports: []string{"#include <tunables/global>"},
			InnerImports: []string{"#include <abstractions/base>"}, DaemonProfile: "containerd", RootlessKit: "/usr/bin/rootlesskit"},
		{Name: "p", Imports: []string{"a", "b"}, InnerImports: []string{"c", "d"}, DaemonProfile: "d"},
	} {
		var want strings.Builder
		if err := tmpl.Execute(&want, p); err != nil {
			t.Fatal(err)
		}
		if got := p.render(); got != want.String() {
			t.Errorf("render(%+v):\n%s\nwant (containerd's template):\n%s", p, got, want.String())
		}
	}
}

func TestAppArmorProfileLoaded(t *testing.T) {
	profiles := "docker-default (enforce)\nnodeagent-default-old (enforce)\nnodeagent-default (complain)\n"
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"nodeagent-default", true},
		{"docker-default", true},
		{"nodeagent", false},
		{"cri-containerd.apparmor.d", false},
	} {
		got, err := appArmorProfileLoaded(strings.NewReader(profiles), tc.name)
		if err != nil || got != tc.want {
			t.Errorf("appArmorProfileLoaded(%q) = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

func TestAppArmorProfileName(t *testing.T) {
	for in, want := range map[string]string{"": "unconfined", "\n": "unconfined", "containerd (enforce)\n": "containerd", "unconfined\n": "unconfined"} {
		if got := appArmorProfileName(in); got != want {
			t.Errorf("appArmorProfileName(%q) = %q, want %q", in, got, want)
		}
	}
}
