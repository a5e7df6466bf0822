package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// numaNodes points SysNodeDir at a directory laid out as sysfs with n
// NUMA nodes for the test.
func numaNodes(t *testing.T, n int) {
	t.Helper()
	dir := t.TempDir()
	for i := range n {
		if err := os.Mkdir(filepath.Join(dir, "node"+strconv.Itoa(i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"online", "possible", "has_cpu"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := SysNodeDir
	SysNodeDir = dir
	t.Cleanup(func() { SysNodeDir = old })
}

func TestNUMANodes(t *testing.T) {
	numaNodes(t, 3)
	if n, err := NUMANodes(SysNodeDir); n != 3 || err != nil {
		t.Errorf("NUMANodes = %d, %v; want 3", n, err)
	}
	if n, err := NUMANodes(filepath.Join(t.TempDir(), "none")); n != 1 || err != nil {
		t.Errorf("NUMANodes without the directory = %d, %v; want 1 (a kernel without NUMA)", n, err)
	}
}

func TestValidateTopologyManager(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		nodes int
		set   func(c *NodeAgentConfiguration)
		want  []string
	}{
		{desc: "none (default)", nodes: 2, set: func(*NodeAgentConfiguration) {}},
		{desc: "single-numa-node with the static CPU manager", nodes: 1, set: func(c *NodeAgentConfiguration) {
			c.CPUManagerPolicy, c.ReservedSystemCPUs, c.TopologyManagerPolicy = "static", "0", "single-numa-node"
		}},
		{desc: "restricted, container scope", nodes: 1, set: func(c *NodeAgentConfiguration) {
			c.TopologyManagerPolicy, c.TopologyManagerScope = "restricted", "container"
		}},
		{desc: "best-effort with kubelet's options", nodes: 1, set: func(c *NodeAgentConfiguration) {
			c.TopologyManagerPolicy = "best-effort"
			c.TopologyManagerPolicyOptions = map[string]string{"prefer-closest-numa-nodes": "true", "max-allowable-numa-nodes": "16"}
		}},
		{desc: "unknown policy and scope", nodes: 1, set: func(c *NodeAgentConfiguration) {
			c.TopologyManagerPolicy, c.TopologyManagerScope = "single-numa", "node"
		}, want: []string{
			`topologyManagerPolicy: Invalid value: "single-numa": invalid configuration: topologyManagerPolicy (--topology-manager-policy) "single-numa" must be one of: ["none" "best-effort" "restricted" "single-numa-node"]`,
			`topologyManagerScope: Invalid value: "node": invalid configuration: topologyManagerScope (--topology-manager-scope) "node" must be one of: "container", or "pod"`,
		}},
		{desc: "more than one NUMA node", nodes: 2, set: func(c *NodeAgentConfiguration) { c.TopologyManagerPolicy = "single-numa-node" },
			want: []string{`topologyManagerPolicy: Invalid value: "single-numa-node": nodeagent implements the topology manager on machines with one NUMA node only, and this one has 2 (`}},
		{desc: "pod scope", nodes: 1, set: func(c *NodeAgentConfiguration) {
			c.TopologyManagerPolicy, c.TopologyManagerScope = "restricted", "pod"
		}},
		{desc: "bad and unknown options", nodes: 1, set: func(c *NodeAgentConfiguration) {
			c.TopologyManagerPolicy = "restricted"
			c.TopologyManagerPolicyOptions = map[string]string{"prefer-closest-numa-nodes": "yes", "max-allowable-numa-nodes": "4", "bogus": "1"}
		}, want: []string{
			`topologyManagerPolicyOptions[bogus]: Invalid value: "1": unknown Topology Manager Policy option: "bogus"`,
			`topologyManagerPolicyOptions[max-allowable-numa-nodes]: Invalid value: "4": the minimum value of "max-allowable-numa-nodes" should not be less than 8`,
			`topologyManagerPolicyOptions[prefer-closest-numa-nodes]: Invalid value: "yes": bad value for option "prefer-closest-numa-nodes": strconv.ParseBool: parsing "yes": invalid syntax`,
		}},
		{desc: "beta option with its gate off", nodes: 1, set: func(c *NodeAgentConfiguration) {
			c.TopologyManagerPolicy = "restricted"
			c.FeatureGates = map[string]bool{"TopologyManagerPolicyBetaOptions": false}
			c.TopologyManagerPolicyOptions = map[string]string{"max-allowable-numa-nodes": "8"}
		}, want: []string{`topologyManagerPolicyOptions[max-allowable-numa-nodes]: Invalid value: "8": topology manager policy beta-level options not enabled, but option "max-allowable-numa-nodes" provided`}},
		{desc: "options with the options gate off, even with none", nodes: 1, set: func(c *NodeAgentConfiguration) {
			c.FeatureGates = map[string]bool{"TopologyManagerPolicyOptions": false}
			c.TopologyManagerPolicyOptions = map[string]string{"prefer-closest-numa-nodes": "true"}
		}, want: []string{`topologyManagerPolicyOptions: Invalid value: {"prefer-closest-numa-nodes":"true"}: topology manager policy options map[prefer-closest-numa-nodes:true] require feature gates "TopologyManagerPolicyOptions" enabled`}},
		{desc: "options are not read with none (kubelet ignores them)", nodes: 2, set: func(c *NodeAgentConfiguration) {
			c.TopologyManagerPolicyOptions = map[string]string{"bogus": "1"}
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			numaNodes(t, tc.nodes)
			c := Default()
			tc.set(c)
			var got []string
			for _, e := range validateTopologyManager(c) {
				got = append(got, e.Error())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("error %q, want %q", got[i], tc.want[i])
				}
			}
		})
	}
	if c := Default(); c.TopologyManagerPolicy != "none" || c.TopologyManagerScope != "container" {
		t.Errorf("defaults %q %q, want kubelet's none, container", c.TopologyManagerPolicy, c.TopologyManagerScope)
	}
}

// A KubeletConfiguration with the topology manager decodes on a machine
// with one NUMA node and is refused, naming the field, on one with two.
func TestDecodeTopologyManager(t *testing.T) {
	const body = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\ntopologyManagerPolicy: single-numa-node\ntopologyManagerScope: container\ntopologyManagerPolicyOptions:\n  prefer-closest-numa-nodes: \"true\"\n"
	numaNodes(t, 1)
	cfg, _, err := DecodeBytes("k.yaml", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TopologyManagerPolicy != "single-numa-node" || cfg.TopologyManagerScope != "container" || cfg.TopologyManagerPolicyOptions["prefer-closest-numa-nodes"] != "true" {
		t.Errorf("decoded %q %q %v", cfg.TopologyManagerPolicy, cfg.TopologyManagerScope, cfg.TopologyManagerPolicyOptions)
	}
	numaNodes(t, 2)
	if _, _, err := DecodeBytes("k.yaml", []byte(body)); err == nil || !strings.Contains(err.Error(), "topologyManagerPolicy") || !strings.Contains(err.Error(), "one NUMA node only, and this one has 2") {
		t.Errorf("two NUMA nodes: %v, want a refusal naming topologyManagerPolicy", err)
	}
}
