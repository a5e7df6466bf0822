package userns

import (
	"errors"
	"os/user"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// fakeStore is a Store in memory; dirs are the pods that have a
// directory (an allocation needs one, as on disk).
type fakeStore struct {
	files map[types.UID][]byte
	dirs  map[types.UID]bool
	fail  error
}

func newFakeStore() *fakeStore {
	return &fakeStore{files: map[types.UID][]byte{}, dirs: map[types.UID]bool{}}
}

func (s *fakeStore) List() ([]types.UID, error) {
	var out []types.UID
	for uid := range s.dirs {
		out = append(out, uid)
	}
	return out, nil
}

func (s *fakeStore) Read(uid types.UID) ([]byte, error) {
	b, ok := s.files[uid]
	if !ok {
		return nil, ErrNotFound
	}
	return b, nil
}

func (s *fakeStore) Write(uid types.UID, data []byte) error {
	if s.fail != nil {
		return s.fail
	}
	s.dirs[uid] = true
	s.files[uid] = append([]byte(nil), data...)
	return nil
}

func (s *fakeStore) Remove(uid types.UID) error { delete(s.files, uid); return nil }

func first(n int) int { return 0 }

func TestNewChecksTheRangeAsKubelet(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		o       Options
		wantErr string
	}{
		{"kubelet's default", Options{Range: Range{DefaultFirstID, DefaultLength}, MaxPods: 110}, ""},
		{"idsPerPod not a multiple of 65536", Options{Range: Range{1 << 17, 1 << 20}, IDsPerPod: 1000, MaxPods: 1}, "kubelet user namespace length 1000 is not a multiple of 65536"},
		{"first ID not aligned", Options{Range: Range{100000, 65536 * 200}, MaxPods: 110}, "kubelet user assigned ID 100000 is not a multiple of 65536"},
		{"host ID 0 would be mapped", Options{Range: Range{0, 65536 * 200}, MaxPods: 110}, "kubelet user assigned ID 0 must be greater or equal to 65536"},
		{"length not a multiple", Options{Range: Range{65536, 65536*200 + 1}, MaxPods: 110}, "kubelet user assigned IDs length 13107201 is not a multiple of 65536"},
		{"too few slots for maxPods", Options{Range: Range{65536, 65536 * 10}, MaxPods: 110}, "kubelet user assigned IDs are not enough to support 110 pods"},
		{"two slots per pod", Options{Range: Range{1 << 17, 1 << 24}, IDsPerPod: 1 << 17, MaxPods: 110}, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := New(newFakeStore(), tc.o)
			if got := errString(err); got != tc.wantErr {
				t.Errorf("New: %q, want %q", got, tc.wantErr)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestAllocatePersistReleaseAcrossRestart(t *testing.T) {
	st := newFakeStore()
	o := Options{Range: Range{65536, 65536 * 4}, MaxPods: 4, RandIntN: first}
	m, err := New(st, o)
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.GetOrCreate("a")
	if err != nil {
		t.Fatal(err)
	}
	want := IDMapping{HostID: 65536, ContainerID: 0, Length: 65536}
	if a.UIDMappings[0] != want || a.GIDMappings[0] != want || len(a.UIDMappings) != 1 {
		t.Fatalf("pod a: %+v, want one mapping %+v for UIDs and GIDs", a, want)
	}
	if got := string(st.files["a"]); got != `{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":0,"length":65536}]}` {
		t.Errorf("file of pod a: %s (kubelet's format expected)", got)
	}
	again, _ := m.GetOrCreate("a")
	if again.UIDMappings[0] != want {
		t.Errorf("pod a again: %+v", again)
	}
	b, _ := m.GetOrCreate("b")
	if b.UIDMappings[0].HostID != 2*65536 {
		t.Errorf("pod b: %+v, want the next free slot", b)
	}

	// A restart: a new manager on the same store keeps both and hands out
	// neither again.
	m2, err := New(st, o)
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := m2.Allocated("a"); !ok || f != 65536 {
		t.Errorf("after restart pod a: %d %v", f, ok)
	}
	c, _ := m2.GetOrCreate("c")
	d, _ := m2.GetOrCreate("d")
	if c.UIDMappings[0].HostID != 3*65536 || d.UIDMappings[0].HostID != 4*65536 {
		t.Errorf("after restart c %+v d %+v: want the two free slots", c, d)
	}
	if _, err := m2.GetOrCreate("e"); err == nil || !strings.Contains(err.Error(), "could not find an empty slot") {
		t.Errorf("fifth pod in four slots: %v", err)
	}
	if err := m2.Release("b"); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.files["b"]; ok {
		t.Error("pod b's file was not removed")
	}
	e, err := m2.GetOrCreate("e")
	if err != nil || e.UIDMappings[0].HostID != 2*65536 {
		t.Errorf("pod e after b's release: %+v %v", e, err)
	}
}

func TestWriteFailureAllocatesNothing(t *testing.T) {
	st := newFakeStore()
	m, _ := New(st, Options{Range: Range{65536, 65536}, MaxPods: 1, RandIntN: first})
	st.fail = errors.New("disk full")
	if _, err := m.GetOrCreate("a"); err == nil {
		t.Fatal("no error")
	}
	st.fail = nil
	if _, err := m.GetOrCreate("b"); err != nil {
		t.Errorf("the only slot was kept by a failed write: %v", err)
	}
}

func TestRestartRefusesBadOrConflictingFiles(t *testing.T) {
	o := Options{Range: Range{65536, 65536 * 4}, MaxPods: 4}
	for _, tc := range []struct {
		desc, a, b, wantErr string
	}{
		{"two pods in one slot",
			`{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":0,"length":65536}]}`,
			`{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":0,"length":65536}]}`,
			"already taken"},
		{"uid and gid differ", `{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}],"gidMappings":[{"hostId":131072,"containerId":0,"length":65536}]}`, "",
			"GID and UID mapping should be identical"},
		{"root not mapped", `{"uidMappings":[{"hostId":65536,"containerId":1,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":1,"length":65536}]}`, "",
			"UID 0 must be mapped"},
		{"outside the range", `{"uidMappings":[{"hostId":655360,"containerId":0,"length":65536}],"gidMappings":[{"hostId":655360,"containerId":0,"length":65536}]}`, "",
			"is out of range"},
		{"not JSON", `{`, "", "invalid user namespace mappings file"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			st := newFakeStore()
			st.Write("a", []byte(tc.a))
			if tc.b != "" {
				st.Write("b", []byte(tc.b))
			}
			_, err := New(st, o)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("New: %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestReleaseOrphans(t *testing.T) {
	st := newFakeStore()
	m, _ := New(st, Options{Range: Range{65536, 65536 * 4}, MaxPods: 4, RandIntN: first})
	for _, uid := range []types.UID{"kept", "orphan", "nodir"} {
		if _, err := m.GetOrCreate(uid); err != nil {
			t.Fatal(err)
		}
	}
	delete(st.dirs, "nodir") // its directory went away
	if err := m.ReleaseOrphans(func(uid types.UID) bool { return uid == "kept" || uid == "nodir" }); err != nil {
		t.Fatal(err)
	}
	for uid, want := range map[types.UID]bool{"kept": true, "orphan": false, "nodir": false} {
		if _, ok := m.Allocated(uid); ok != want {
			t.Errorf("%s allocated %v, want %v", uid, ok, want)
		}
	}
}

func TestHostRange(t *testing.T) {
	kubelet := &user.User{Username: "kubelet", Uid: "998"}
	withUser := func(string) (*user.User, error) { return kubelet, nil }
	noUser := func(n string) (*user.User, error) { return nil, user.UnknownUserError(n) }
	def := Range{DefaultFirstID, DefaultLength}
	for _, tc := range []struct {
		desc           string
		lookup         func(string) (*user.User, error)
		subuid, subgid string
		want           Range
		wantErr        string
	}{
		{"no kubelet user", noUser, "kubelet:65536:65536\n", "kubelet:65536:65536\n", def, ""},
		{"user without entries", withUser, "other:100000:65536\n", "", def, ""},
		{"entries by name", withUser, "other:1:2\nkubelet:65536:7208960\n", "kubelet:65536:7208960\n", Range{65536, 7208960}, ""},
		{"entries by uid", withUser, "998:131072:65536\n", "kubelet:131072:65536\n", Range{131072, 65536}, ""},
		{"mismatch", withUser, "kubelet:65536:65536\n", "kubelet:131072:65536\n", Range{}, `mismatched subuids and subgids for user "kubelet"`},
		{"two lines", withUser, "kubelet:65536:65536\nkubelet:196608:65536\n", "kubelet:65536:65536\nkubelet:196608:65536\n", Range{}, "it must contain only one line"},
		{"garbage", withUser, "kubelet:x:65536\n", "kubelet:x:65536\n", Range{}, "invalid line"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := HostRange(tc.lookup, []byte(tc.subuid), []byte(tc.subgid))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("%+v %v, want %+v", got, err, tc.want)
			}
		})
	}
}

func TestDirStore(t *testing.T) {
	dir := t.TempDir()
	s := DirStore{Dir: dir}
	if _, err := s.Read("a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read of a missing file: %v", err)
	}
	if err := s.Write("a", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Read("a"); err != nil || string(b) != "{}" {
		t.Errorf("read back %q %v", b, err)
	}
	if uids, _ := s.List(); len(uids) != 1 || uids[0] != "a" {
		t.Errorf("list %v", uids)
	}
	if err := s.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("a"); err != nil {
		t.Errorf("second remove: %v", err)
	}
	if _, err := s.Read("a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after remove: %v", err)
	}
}
