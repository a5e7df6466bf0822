package runtime

import (
	"errors"
	"testing"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"
)

func TestContainerCgroupsPath(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		systemd bool
		parent  string
		want    string
		wantErr bool
	}{
		{desc: "cgroupfs", parent: "/kubepods/burstable/podu1", want: "/kubepods/burstable/podu1/c1"},
		{desc: "cgroupfs wants a path", parent: "kubepods-podu1.slice", wantErr: true},
		{desc: "systemd, as containerd's CRI plugin", systemd: true, parent: "kubepods-burstable-podu1.slice", want: "kubepods-burstable-podu1.slice:cri-containerd:c1"},
		{desc: "systemd wants a slice", systemd: true, parent: "/kubepods/podu1", wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := &Runtime{opts: Options{SystemdCgroup: tc.systemd}}
			got, err := r.containerCgroupsPath(tc.parent, "c1")
			if tc.wantErr {
				if !errors.Is(err, ErrInvalidSpec) {
					t.Fatalf("err = %v, want ErrInvalidSpec", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestRuntimeOptionsSystemdCgroup(t *testing.T) {
	r := &Runtime{opts: Options{SystemdCgroup: true}}
	o, ok := r.runtimeOptions(DefaultRuntimeType).(*runcoptions.Options)
	if !ok || !o.SystemdCgroup {
		t.Errorf("runc options with the systemd driver = %v, want SystemdCgroup", r.runtimeOptions(DefaultRuntimeType))
	}
	if o := r.runtimeOptions("io.containerd.kata.v2"); o != nil {
		t.Errorf("options for another shim = %v, want none", o)
	}
	if o := (&Runtime{}).runtimeOptions(DefaultRuntimeType); o != nil {
		t.Errorf("options with cgroupfs = %v, want none", o)
	}
}

func TestRestrictedOOMScoreAdjFloor(t *testing.T) {
	own := func() (int, error) { return 5, nil }
	for _, tc := range []struct {
		desc, status string
		want         int
	}{
		{"CAP_SYS_RESOURCE: anything goes", "Name:\tx\nCapEff:\t000001ffffffffff\n", -1000},
		{"without it: no lower than our own", "CapEff:\t000001fffeffffff\n", 5},
		{"unreadable: do not restrict", "Name:\tx\n", -1000},
	} {
		if got := restrictedOOMScoreAdjFloor(tc.status, own); got != tc.want {
			t.Errorf("%s: floor = %d, want %d", tc.desc, got, tc.want)
		}
	}
}

func TestCgroupfsPath(t *testing.T) {
	for in, want := range map[string]string{
		"/nodeagent/uid/abc":                     "/nodeagent/uid/abc",
		"system.slice:cri-containerd:abc":        "/system.slice/cri-containerd-abc.scope",
		"kubepods-besteffort-pod1.slice:cri:abc": "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/cri-abc.scope",
		":cri:abc":                               "/cri-abc.scope",
		"kubepods.slice:cri:kubepods-pod2.slice": "/kubepods.slice/kubepods-pod2.slice",
	} {
		if got := CgroupfsPath(in); got != want {
			t.Errorf("CgroupfsPath(%q) = %q, want %q", in, got, want)
		}
	}
}
