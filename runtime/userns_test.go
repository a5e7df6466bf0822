package runtime

import (
	"encoding/json"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// The features documents of runc 1.1 (no mount extensions) and 1.2+
// (idmapped mounts), trimmed: only the latter runs user namespaces, as
// containerd's CRI decides for kubelet.
func TestRuntimeFeaturesSupportUserns(t *testing.T) {
	for _, tc := range []struct {
		desc, doc string
		want      bool
	}{
		{"runc 1.1", `{"ociVersionMin":"1.0.0","linux":{"namespaces":["cgroup","ipc","mount","network","pid","user","uts"]}}`, false},
		{"runc 1.3", `{"linux":{"namespaces":["cgroup","ipc","mount","network","pid","user","uts"],"mountExtensions":{"idmap":{"enabled":true}}}}`, true},
		{"idmap disabled", `{"linux":{"namespaces":["user"],"mountExtensions":{"idmap":{"enabled":false}}}}`, false},
		{"no user namespace", `{"linux":{"namespaces":["pid"],"mountExtensions":{"idmap":{"enabled":true}}}}`, false},
		{"empty", `{}`, false},
	} {
		var f runtimeFeatures
		if err := json.Unmarshal([]byte(tc.doc), &f); err != nil {
			t.Fatal(err)
		}
		if got := f.supportsUserns(); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.desc, got, tc.want)
		}
	}
}

func TestUserNamespaceSpec(t *testing.T) {
	u := &UserNamespace{UIDs: []IDMapping{{0, 196608, 65536}}, GIDs: []IDMapping{{0, 196608, 65536}}}
	if err := u.validate(); err != nil {
		t.Fatal(err)
	}
	if uid, gid, ok := u.hostRoot(); !ok || uid != 196608 || gid != 196608 {
		t.Errorf("hostRoot %d %d %v", uid, gid, ok)
	}
	ms := []specs.Mount{{Type: "bind", Source: "/a", Destination: "/b", Options: []string{"rbind", "rw"}}}
	idmapMounts(ms, u)
	want := []specs.LinuxIDMapping{{ContainerID: 0, HostID: 196608, Size: 65536}}
	if len(ms[0].UIDMappings) != 1 || ms[0].UIDMappings[0] != want[0] || ms[0].GIDMappings[0] != want[0] {
		t.Errorf("mount %+v: want idmapped with %+v", ms[0], want)
	}
	bad := &UserNamespace{UIDs: []IDMapping{{1, 196608, 65536}}, GIDs: []IDMapping{{1, 196608, 65536}}}
	if bad.validate() == nil {
		t.Error("a namespace without container ID 0 mapped was accepted")
	}
}
