package config

import (
	"errors"
	"testing"
)

// singleProcessOOMKill as kubelet defaults and validates it: unset is
// false on cgroup v2 and true on v1; false is refused on v1 with kubelet's
// error; it is read from both file kinds.
func TestSingleProcessOOMKill(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		yaml    string
		unified bool
		want    bool
		err     error
	}{
		{"unset, cgroup v2", "", true, false, nil},
		{"unset, cgroup v1", "", false, true, nil},
		{"true, cgroup v2", "singleProcessOOMKill: true\n", true, true, nil},
		{"false, cgroup v2", "singleProcessOOMKill: false\n", true, false, nil},
		{"true, cgroup v1", "singleProcessOOMKill: true\n", false, true, nil},
		{"false, cgroup v1", "singleProcessOOMKill: false\n", false, false, ErrSingleProcessOOMKillV1},
	} {
		for _, head := range []string{
			"apiVersion: " + APIVersion + "\nkind: " + Kind + "\n",
			"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n",
		} {
			t.Run(tc.desc+", "+head[:len("apiVersion: ")+8], func(t *testing.T) {
				cfg, _, err := DecodeBytes("c.yaml", []byte(head+tc.yaml))
				if err != nil {
					t.Fatal(err)
				}
				got, err := cfg.EffectiveSingleProcessOOMKill(tc.unified)
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
				if err == nil && got != tc.want {
					t.Errorf("singleProcessOOMKill = %v, want %v", got, tc.want)
				}
			})
		}
	}
	if got := ErrSingleProcessOOMKillV1.Error(); got != "invalid configuration: singleProcessOOMKill must not be explicitly set to false when using cgroup v1" {
		t.Errorf("error %q is not kubelet's", got)
	}
	if _, _, err := DecodeBytes("c.yaml", []byte("apiVersion: "+APIVersion+"\nkind: "+Kind+"\nsingleProcessOOMKill: maybe\n")); err == nil {
		t.Error("singleProcessOOMKill: maybe accepted")
	}
}
