package runtime

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func genSpec(t *testing.T, opts ...oci.SpecOpts) *specs.Spec {
	t.Helper()
	ctx := namespaces.WithNamespace(context.Background(), "test")
	sp, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "c"}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func shmMounts(sp *specs.Spec) []specs.Mount {
	var out []specs.Mount
	for _, m := range sp.Mounts {
		if m.Destination == "/dev/shm" {
			out = append(out, m)
		}
	}
	return out
}

func TestPodNamespaceOpts(t *testing.T) {
	for _, tc := range []struct {
		desc      string
		n         PodNamespaces
		sec       Security
		ipc, uts  string // the namespace path ("" own, "host": none)
		shmSource string
	}{
		{desc: "own namespaces", shmSource: "shm"},
		{desc: "pod IPC and UTS", n: PodNamespaces{IPCPath: "/p/ipc", ShmPath: "/p/shm", UTSPath: "/p/uts"},
			ipc: "/p/ipc", uts: "/p/uts", shmSource: "/p/shm"},
		{desc: "hostIPC wins", n: PodNamespaces{UTSPath: "/p/uts"}, sec: Security{HostIPC: true},
			ipc: "host", uts: "/p/uts", shmSource: "/dev/shm"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if err := tc.n.validate(); err != nil {
				t.Fatal(err)
			}
			sp := genSpec(t, append(append([]oci.SpecOpts{oci.WithHostname("pod")}, podNamespaceOpts(tc.n)...), securitySpecOpts(tc.sec, allCaps)...)...)
			for typ, want := range map[specs.LinuxNamespaceType]string{specs.IPCNamespace: tc.ipc, specs.UTSNamespace: tc.uts} {
				ok, p := hasNS(sp, typ)
				switch {
				case want == "host" && ok, want != "host" && !ok, want != "host" && p != want:
					t.Errorf("%s namespace: present %v path %q, want %q", typ, ok, p, want)
				}
			}
			if (sp.Hostname == "") != (tc.uts != "") {
				t.Errorf("hostname %q with UTS path %q: a joined UTS namespace keeps its hostname", sp.Hostname, tc.uts)
			}
			if ms := shmMounts(sp); len(ms) != 1 || ms[0].Source != tc.shmSource {
				t.Errorf("/dev/shm mounts %+v, want one from %q", ms, tc.shmSource)
			}
			if ok, p := hasNS(sp, specs.PIDNamespace); !ok || p != "" {
				t.Errorf("PID namespace %v %q: want the container's own", ok, p)
			}
		})
	}
}

func TestPodNamespacesValidate(t *testing.T) {
	for _, n := range []PodNamespaces{{IPCPath: "rel"}, {UTSPath: "rel"}, {ShmPath: "/shm"}} {
		if err := n.validate(); err == nil {
			t.Errorf("%+v: no error", n)
		}
	}
	s := ContainerSpec{PodNamespaces: PodNamespaces{UTSPath: "uts"}}
	if err := s.Validate(); err == nil || !contains(err.Error(), "podNamespaces.utsPath") {
		t.Errorf("Validate: %v, want the field named", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// The pause: PID namespace of its own, the pod's network, IPC and UTS
// namespaces, read-only rootfs, no capabilities, the binary bound on
// /pause, kubelet's sandbox OOM score.
func TestPauseSpec(t *testing.T) {
	s := PauseSpec{RootfsDir: "/r", NetNSPath: "/n/uid", PodNamespaces: PodNamespaces{IPCPath: "/p/ipc", ShmPath: "/p/shm", UTSPath: "/p/uts"}}
	sp := genSpec(t, pauseSpecOpts(s, "/usr/bin/logger", "/nodeagent/uid/id")...)
	if sp.Root.Path != "/r" || !sp.Root.Readonly {
		t.Errorf("root %+v", sp.Root)
	}
	if !slices.Equal(sp.Process.Args, []string{"/pause", "pause"}) || !sp.Process.NoNewPrivileges || len(sp.Process.Capabilities.Effective) != 0 || len(sp.Process.Capabilities.Bounding) != 0 {
		t.Errorf("process %+v", sp.Process)
	}
	if sp.Process.OOMScoreAdj == nil || *sp.Process.OOMScoreAdj > 0 {
		t.Errorf("oom_score_adj %v", sp.Process.OOMScoreAdj)
	}
	for typ, want := range map[specs.LinuxNamespaceType]string{specs.PIDNamespace: "", specs.NetworkNamespace: "/n/uid", specs.IPCNamespace: "/p/ipc", specs.UTSNamespace: "/p/uts"} {
		if ok, p := hasNS(sp, typ); !ok || p != want {
			t.Errorf("%s namespace %v %q, want %q", typ, ok, p, want)
		}
	}
	var bin bool
	for _, m := range sp.Mounts {
		bin = bin || m.Destination == "/pause" && m.Source == "/usr/bin/logger" && slices.Contains(m.Options, "ro")
	}
	if !bin || sp.Linux.CgroupsPath != "/nodeagent/uid/id" {
		t.Errorf("binary mounted %v, cgroup %q", bin, sp.Linux.CgroupsPath)
	}
	sp = genSpec(t, pauseSpecOpts(PauseSpec{RootfsDir: "/r", HostNetwork: true, HostIPC: true}, "/b", "/c")...)
	for _, typ := range []specs.LinuxNamespaceType{specs.NetworkNamespace, specs.UTSNamespace, specs.IPCNamespace} {
		if ok, _ := hasNS(sp, typ); ok {
			t.Errorf("hostNetwork/hostIPC pause has a %s namespace of its own", typ)
		}
	}
}
