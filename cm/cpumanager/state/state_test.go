package state

import (
	"errors"
	"os"
	"testing"

	"k8s.io/utils/cpuset"
)

// Checkpoints kubelet 1.34 wrote, with their checksums (from kubelet's
// own state_checkpoint_test.go): ours must accept them, so that both
// compute the same checksum.
func TestKubeletChecksums(t *testing.T) {
	for _, tc := range []struct {
		desc, file string
		want       State
	}{
		{"default set only", `{"policyName": "none", "defaultCPUSet": "4-6", "entries": {}, "checksum": 354655845}`,
			State{Policy: "none", Default: cpuset.New(4, 5, 6), Assign: Assignments{}}},
		{"entries", `{"policyName": "none", "defaultCPUSet": "1-3", "entries": {"pod": {"container1": "4-6", "container2": "1-3"}}, "checksum": 3610638499}`,
			State{Policy: "none", Default: cpuset.New(1, 2, 3), Assign: Assignments{"pod": {"container1": cpuset.New(4, 5, 6), "container2": cpuset.New(1, 2, 3)}}}},
		{"other policy", `{"policyName": "other", "defaultCPUSet": "1-3", "entries": {}, "checksum": 1394507217}`,
			State{Policy: "other", Default: cpuset.New(1, 2, 3), Assign: Assignments{}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := Unmarshal([]byte(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if got.Policy != tc.want.Policy || !got.Default.Equals(tc.want.Default) || len(got.Assign) != len(tc.want.Assign) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for pod, cs := range tc.want.Assign {
				for name, set := range cs {
					if !got.Assign[pod][name].Equals(set) {
						t.Errorf("%s/%s: %v, want %v", pod, name, got.Assign[pod][name], set)
					}
				}
			}
			// Written again, the file has kubelet's checksum.
			b, err := Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Unmarshal(b); err != nil {
				t.Errorf("own file refused: %v", err)
			}
		})
	}
}

func TestCorrupt(t *testing.T) {
	for _, tc := range []struct{ desc, file, want string }{
		{"checksum", `{"policyName": "none", "defaultCPUSet": "4-6", "entries": {}, "checksum": 1337}`, ""},
		{"not JSON", `{`, ""},
	} {
		if _, err := Unmarshal([]byte(tc.file)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", tc.desc, err)
		}
	}
	// kubelet's messages for unparsable sets (checksums from kubelet's tests).
	for file, want := range map[string]string{
		`{"policyName": "none", "defaultCPUSet": "1.3", "entries": {}, "checksum": 3021697696}`:                                                 `could not parse default cpu set "1.3": strconv.Atoi: parsing "1.3": invalid syntax`,
		`{"policyName": "none", "defaultCPUSet": "1-3", "entries": {"pod": {"container1": "4-6", "container2": "asd"}}, "checksum": 962272150}`: `could not parse cpuset "asd" for container "container2" in pod "pod": strconv.Atoi: parsing "asd": invalid syntax`,
	} {
		if _, err := Unmarshal([]byte(file)); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", file, err, want)
		}
	}
}

func TestWriteRead(t *testing.T) {
	dir := t.TempDir()
	if _, err := Read(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	s := State{Policy: "static", Default: cpuset.New(0, 3), Assign: Assignments{"uid": {"app": cpuset.New(1, 2)}}}
	if err := Write(dir, s); err != nil {
		t.Fatal(err)
	}
	got, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Policy != "static" || got.Default.String() != "0,3" || got.Assign["uid"]["app"].String() != "1-2" {
		t.Errorf("read %+v", got)
	}
}
