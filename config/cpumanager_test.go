package config

import (
	"strings"
	"testing"
	"time"
)

func TestValidateCPUManager(t *testing.T) {
	for _, tc := range []struct {
		desc string
		set  func(c *NodeAgentConfiguration)
		want []string
	}{
		{desc: "none (default)", set: func(*NodeAgentConfiguration) {}},
		{desc: "static with reservedSystemCPUs", set: func(c *NodeAgentConfiguration) {
			c.CPUManagerPolicy, c.ReservedSystemCPUs = "static", "0"
		}},
		{desc: "static with kubeReserved cpu", set: func(c *NodeAgentConfiguration) {
			c.CPUManagerPolicy, c.KubeReserved = "static", map[string]string{"cpu": "100m"}
		}},
		{desc: "static without a reservation", set: func(c *NodeAgentConfiguration) {
			c.CPUManagerPolicy, c.SystemReserved = "static", map[string]string{"cpu": "0", "memory": "1Gi"}
		}, want: []string{`cpuManagerPolicy: Invalid value: "static": [cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero (or reservedSystemCPUs)`}},
		{desc: "unknown policy", set: func(c *NodeAgentConfiguration) { c.CPUManagerPolicy = "Static" },
			want: []string{`cpuManagerPolicy: Unsupported value: "Static": supported values: "none", "static"`}},
		{desc: "options", set: func(c *NodeAgentConfiguration) {
			c.CPUManagerPolicy, c.ReservedSystemCPUs = "static", "0"
			c.CPUManagerPolicyOptions = map[string]string{"full-pcpus-only": "true", "bogus": "1"}
		}, want: []string{
			`cpuManagerPolicyOptions[bogus]: Invalid value: "1": unsupported cpumanager option: "bogus" (1)`,
			`cpuManagerPolicyOptions[full-pcpus-only]: Invalid value: "true": nodeagent does not implement this static policy option; remove it`,
		}},
		{desc: "options with none", set: func(c *NodeAgentConfiguration) {
			c.CPUManagerPolicyOptions = map[string]string{"full-pcpus-only": "true"}
		}, want: []string{`cpuManagerPolicyOptions[full-pcpus-only]: Invalid value: "true": None policy: received unsupported options=map[full-pcpus-only:true]`}},
		{desc: "bad cpuset and period", set: func(c *NodeAgentConfiguration) {
			c.ReservedSystemCPUs, c.CPUManagerReconcilePeriod = "0-", dur(0)
		}, want: []string{
			`cpuManagerReconcilePeriod: Invalid value: "0s": must be greater than 0`,
			`reservedSystemCPUs: Invalid value: "0-": invalid configuration: unable to parse reservedSystemCPUs (--reserved-cpus) 0-, error: strconv.Atoi: parsing "": invalid syntax`,
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := Default()
			tc.set(c)
			var got []string
			for _, e := range validateCPUManager(c) {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
	if Default().CPUManagerReconcilePeriod.Duration != 10*time.Second || Default().CPUManagerPolicy != "none" {
		t.Errorf("defaults %v %q", Default().CPUManagerReconcilePeriod, Default().CPUManagerPolicy)
	}
}

// reservedSystemCPUs replaces the cpu reservations, as in kubelet.
func TestReservations(t *testing.T) {
	c := Default()
	c.SystemReserved = map[string]string{"cpu": "500m", "memory": "1Gi"}
	c.KubeReserved = map[string]string{"cpu": "1"}
	c.ReservedSystemCPUs = "0,2-3"
	sys, kube := c.Reservations()
	if sys["cpu"] != "3" || sys["memory"] != "1Gi" || kube["cpu"] != "" {
		t.Errorf("system %v kube %v", sys, kube)
	}
	if c.SystemReserved["cpu"] != "500m" {
		t.Errorf("config changed: %v", c.SystemReserved)
	}
	// A KubeletConfiguration's fields are used.
	cfg, _, err := DecodeBytes("k.yaml", []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\ncpuManagerReconcilePeriod: 5s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CPUManagerPolicy != "static" || cfg.ReservedSystemCPUs != "0" || cfg.CPUManagerReconcilePeriod.Duration != 5*time.Second {
		t.Errorf("decoded %q %q %v", cfg.CPUManagerPolicy, cfg.ReservedSystemCPUs, cfg.CPUManagerReconcilePeriod)
	}
}
