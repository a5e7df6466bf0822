package config

import (
	"errors"
	"strings"
	"testing"
)

// containerLogMaxWorkers and containerLogMonitorInterval tune kubelet's
// periodic rotation pass, which nodeagent does not need (each container's
// logger rotates as it writes): valid values are accepted without the
// unsupported warning and change nothing; values kubelet refuses are
// refused with kubelet's messages, naming the field.
func TestContainerLogRotationFields(t *testing.T) {
	for _, body := range []string{
		"containerLogMaxWorkers: 1\ncontainerLogMonitorInterval: 10s\n", // kubelet's defaults, as kubeadm may write them
		"containerLogMaxWorkers: 8\ncontainerLogMonitorInterval: 3s\n",
		"containerLogMaxWorkers: null\ncontainerLogMonitorInterval: null\n",
		"containerLogMonitorInterval: 1h\n",
	} {
		cfg, warnings, err := DecodeBytes("k.yaml", []byte(kubeletHdr+body))
		if err != nil {
			t.Errorf("%q: %v", body, err)
			continue
		}
		if len(warnings) != 0 {
			t.Errorf("%q: warnings %q", body, warnings)
		}
		def, _, err := DecodeBytes("k.yaml", []byte(kubeletHdr))
		if err != nil {
			t.Fatal(err)
		}
		if d := Diff(def, cfg); len(d) != 0 {
			t.Errorf("%q changed %v", body, d)
		}
	}
	for _, tc := range []struct{ body, want string }{
		{"containerLogMaxWorkers: 0\n", `k.yaml:3: containerLogMaxWorkers: Invalid value: 0: containerLogMaxWorkers must be greater than or equal to 1`},
		{"containerLogMaxWorkers: -2\n", `k.yaml:3: containerLogMaxWorkers: Invalid value: -2: containerLogMaxWorkers must be greater than or equal to 1`},
		{"containerLogMonitorInterval: 2s\n", `k.yaml:3: containerLogMonitorInterval: Invalid value: "2s": containerLogMonitorInterval must be a positive time duration greater than or equal to 3s`},
		{"containerLogMonitorInterval: 0s\n", `k.yaml:3: containerLogMonitorInterval: Invalid value: "0s": containerLogMonitorInterval must be a positive time duration greater than or equal to 3s`},
		{"containerLogMonitorInterval: -10s\n", `k.yaml:3: containerLogMonitorInterval: Invalid value: "-10s": containerLogMonitorInterval must be a positive time duration greater than or equal to 3s`},
	} {
		_, _, err := DecodeBytes("k.yaml", []byte(kubeletHdr+tc.body))
		var cerr *Error
		if !errors.As(err, &cerr) {
			t.Errorf("%q: %v, want a configuration error", tc.body, err)
			continue
		}
		if got := strings.Join(cerr.Lines(), "\n"); got != tc.want {
			t.Errorf("%q:\n  %s\nwant:\n  %s", tc.body, got, tc.want)
		}
	}
	// A NodeAgentConfiguration has no such fields: strict decoding names
	// them.
	if _, _, err := DecodeBytes("c.yaml", []byte(hdr+"containerLogMaxWorkers: 1\n")); err == nil || !strings.Contains(err.Error(), "containerLogMaxWorkers") {
		t.Errorf("NodeAgentConfiguration with containerLogMaxWorkers: %v", err)
	}
}
