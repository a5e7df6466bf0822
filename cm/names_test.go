package cm

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

func TestCgroupNamePaths(t *testing.T) {
	const uid = "1234-abcd"
	for _, tc := range []struct {
		desc              string
		name              CgroupName
		cgroupfs, systemd string
		slice             string
	}{
		{"root", nil, "/", "/", "-.slice"},
		{"kubepods", CgroupName{"kubepods"}, "/kubepods", "/kubepods.slice", "kubepods.slice"},
		{"guaranteed pod", PodCgroupNameFor(nil, uid, v1.PodQOSGuaranteed),
			"/kubepods/pod1234-abcd", "/kubepods.slice/kubepods-pod1234_abcd.slice", "kubepods-pod1234_abcd.slice"},
		{"burstable pod", PodCgroupNameFor(nil, uid, v1.PodQOSBurstable),
			"/kubepods/burstable/pod1234-abcd",
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd.slice", "kubepods-burstable-pod1234_abcd.slice"},
		{"besteffort pod", PodCgroupNameFor(nil, uid, v1.PodQOSBestEffort),
			"/kubepods/besteffort/pod1234-abcd",
			"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1234_abcd.slice", "kubepods-besteffort-pod1234_abcd.slice"},
		{"under a root of an agent's own", PodCgroupNameFor(RootForNamespace("e2e-n1"), uid, v1.PodQOSBurstable),
			"/nodeagent-e2e-n1/kubepods/burstable/pod1234-abcd",
			"/nodeagent_e2e_n1.slice/nodeagent_e2e_n1-kubepods.slice/nodeagent_e2e_n1-kubepods-burstable.slice/nodeagent_e2e_n1-kubepods-burstable-pod1234_abcd.slice",
			"nodeagent_e2e_n1-kubepods-burstable-pod1234_abcd.slice"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := tc.name.ToCgroupfs(); got != tc.cgroupfs {
				t.Errorf("ToCgroupfs = %q, want %q", got, tc.cgroupfs)
			}
			if got := tc.name.ToSystemd(); got != tc.systemd {
				t.Errorf("ToSystemd = %q, want %q", got, tc.systemd)
			}
			if got := tc.name.SystemdSlice(); got != tc.slice {
				t.Errorf("SystemdSlice = %q, want %q", got, tc.slice)
			}
		})
	}
}

func TestParseRoot(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		systemd bool
		root    string
		want    CgroupName
		wantErr bool
	}{
		{desc: "empty is the root", root: "", want: nil},
		{desc: "slash is the root", root: "/", want: nil},
		{desc: "cgroupfs path", root: "/a/b/", want: CgroupName{"a", "b"}},
		{desc: "cgroupfs relative", root: "a", wantErr: true},
		{desc: "systemd root", systemd: true, root: "/", want: nil},
		{desc: "systemd -.slice", systemd: true, root: "/-.slice", want: nil},
		{desc: "systemd slice", systemd: true, root: "/kube.slice", want: CgroupName{"kube"}},
		{desc: "systemd nested", systemd: true, root: "/kube.slice/kube-a_b.slice", want: CgroupName{"kube", "a-b"}},
		{desc: "systemd bare unit", systemd: true, root: "kube-a.slice", want: CgroupName{"kube", "a"}},
		{desc: "systemd nesting that does not match the name", systemd: true, root: "/x.slice/kube-a.slice", wantErr: true},
		{desc: "systemd not a slice", systemd: true, root: "/kube", wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := ParseRoot(tc.systemd, tc.root)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" && !tc.wantErr {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestRootForNamespace(t *testing.T) {
	if got := RootForNamespace("k8s.io"); got != nil {
		t.Errorf("k8s.io: %v, want the root (kubelet's paths)", got)
	}
	a, b := RootForNamespace("e2e-a"), RootForNamespace("e2e-b")
	if a.ToCgroupfs() == b.ToCgroupfs() || a.ToSystemd() == b.ToSystemd() {
		t.Errorf("two namespaces share a root: %v %v", a, b)
	}
}

func TestRootFor(t *testing.T) {
	for _, tc := range []struct {
		desc, ns, root string
		systemd        bool
		want           string // cgroupfs path of kubepods' parent
	}{
		{"k8s.io: kubelet's paths", "k8s.io", "", false, "/"},
		{"another namespace: a root of its own", "e2e-n1", "", false, "/nodeagent-e2e-n1"},
		{"cgroupRoot wins", "e2e-n1", "/custom", false, "/custom"},
		{"systemd slice root", "k8s.io", "/custom.slice", true, "/custom"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := RootFor(tc.systemd, tc.root, tc.ns)
			if err != nil {
				t.Fatal(err)
			}
			if got.ToCgroupfs() != tc.want {
				t.Errorf("root %s, want %s", got.ToCgroupfs(), tc.want)
			}
		})
	}
}
