package config

import (
	"errors"
	"strings"
	"testing"
)

// readOnlyPort, enableServer and registerNode are read from both kinds
// of file by kubelet's names, with kubelet's defaults (0, true, true),
// without the unsupported warning.
func TestNodeAPIServerFields(t *testing.T) {
	for _, tc := range []struct {
		desc, content string
		readOnlyPort  int32
		enableServer  bool
		registerNode  bool
	}{
		{"nodeagent defaults", hdr, 0, true, true},
		{"kubelet defaults", kubeletHdr, 0, true, true},
		{"kubeadm's zero", kubeletHdr + "readOnlyPort: 0\n", 0, true, true},
		{"kubelet values", kubeletHdr + "readOnlyPort: 10255\nenableServer: false\nregisterNode: false\n", 10255, false, false},
		{"nodeagent values", hdr + "readOnlyPort: 10255\nenableServer: false\nregisterNode: false\n", 10255, false, false},
		{"true", kubeletHdr + "enableServer: true\nregisterNode: true\n", 0, true, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, warnings, err := DecodeBytes("c.yaml", []byte(tc.content))
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) != 0 {
				t.Errorf("warnings %q", warnings)
			}
			if cfg.ReadOnlyPort != tc.readOnlyPort || cfg.EnableServer != tc.enableServer || cfg.RegisterNode != tc.registerNode {
				t.Errorf("readOnlyPort %d enableServer %v registerNode %v, want %d %v %v", cfg.ReadOnlyPort, cfg.EnableServer, cfg.RegisterNode,
					tc.readOnlyPort, tc.enableServer, tc.registerNode)
			}
		})
	}
}

// A readOnlyPort out of range is refused with kubelet's words, and one
// that would collide with another of the agent's ports at start is
// refused at load, naming the field.
func TestReadOnlyPortRefused(t *testing.T) {
	for _, tc := range []struct{ content, want string }{
		{kubeletHdr + "readOnlyPort: 70000\n", `c.yaml:3: readOnlyPort: Invalid value: 70000: must be between 0 and 65535, inclusive`},
		{kubeletHdr + "readOnlyPort: -1\n", `c.yaml:3: readOnlyPort: Invalid value: -1: must be between 0 and 65535, inclusive`},
		{kubeletHdr + "port: 10250\nreadOnlyPort: 10250\n", `c.yaml:4: readOnlyPort: Invalid value: 10250: must differ from port`},
		{kubeletHdr + "healthzPort: 10255\nreadOnlyPort: 10255\n", `c.yaml:4: readOnlyPort: Invalid value: 10255: must differ from healthzPort`},
		{kubeletHdr + "address: nowhere\nreadOnlyPort: 10255\nenableServer: false\n", `c.yaml:3: address: Invalid value: "nowhere": must be an IP address`},
	} {
		_, _, err := DecodeBytes("c.yaml", []byte(tc.content))
		var cerr *Error
		if !errors.As(err, &cerr) {
			t.Errorf("%q: %v, want a configuration error", tc.content, err)
			continue
		}
		if got := strings.Join(cerr.Lines(), "\n"); got != tc.want {
			t.Errorf("%q:\n  %s\nwant:\n  %s", tc.content, got, tc.want)
		}
	}
	// With enableServer false, port is not listened on: the same port
	// for the read-only server is fine.
	cfg, _, err := DecodeBytes("c.yaml", []byte(kubeletHdr+"port: 10250\nreadOnlyPort: 10250\nenableServer: false\n"))
	if err != nil || cfg.ReadOnlyPort != 10250 {
		t.Errorf("enableServer false, readOnlyPort = port: %v", err)
	}
}
