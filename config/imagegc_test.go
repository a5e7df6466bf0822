package config

import (
	"strings"
	"testing"
	"time"
)

// Kubelet's image GC validation, each error naming its field.
func TestValidateImageGC(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		mutate func(c *NodeAgentConfiguration)
		want   []string
	}{
		{"defaults", func(*NodeAgentConfiguration) {}, nil},
		{"disabled with 100", func(c *NodeAgentConfiguration) { c.ImageGCHighThresholdPercent = 100 }, nil},
		{"max age above min age", func(c *NodeAgentConfiguration) { c.ImageMaximumGCAge = dur(time.Hour) }, nil},
		{"out of range", func(c *NodeAgentConfiguration) {
			c.ImageGCHighThresholdPercent, c.ImageGCLowThresholdPercent = 101, -1
		}, []string{
			"imageGCHighThresholdPercent: Invalid value: 101: must be between 0 and 100, inclusive",
			"imageGCLowThresholdPercent: Invalid value: -1: must be between 0 and 100, inclusive",
		}},
		{"low not below high", func(c *NodeAgentConfiguration) { c.ImageGCLowThresholdPercent = 85 }, []string{
			"imageGCLowThresholdPercent: Invalid value: 85: must be less than imageGCHighThresholdPercent (85)",
		}},
		{"ages", func(c *NodeAgentConfiguration) {
			c.ImageMinimumGCAge, c.ImageMaximumGCAge = dur(-time.Second), dur(-time.Second)
		}, []string{
			`imageMinimumGCAge: Invalid value: "-1s": must be greater than or equal to 0`,
			`imageMaximumGCAge: Invalid value: "-1s": must not be negative`,
		}},
		{"max age not above min age", func(c *NodeAgentConfiguration) { c.ImageMaximumGCAge = dur(2 * time.Minute) }, []string{
			`imageMaximumGCAge: Invalid value: "2m0s": must be greater than imageMinimumGCAge (2m0s)`,
		}},
	} {
		c := Default()
		tc.mutate(c)
		errs, _ := Validate(c)
		var got []string
		for _, e := range errs {
			got = append(got, e.Error())
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s: errors:\n%s\nwant:\n%s", tc.desc, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}

// The KubeletConfiguration fields are read with kubelet's names.
func TestImageGCFromKubelet(t *testing.T) {
	c, _, err := DecodeBytes("kubelet.yaml", []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nimageGCHighThresholdPercent: 90\nimageGCLowThresholdPercent: 50\nimageMinimumGCAge: 5m\nimageMaximumGCAge: 168h\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.ImageGCHighThresholdPercent != 90 || c.ImageGCLowThresholdPercent != 50 || c.ImageMinimumGCAge.Duration != 5*time.Minute || c.ImageMaximumGCAge.Duration != 168*time.Hour {
		t.Fatalf("image GC fields %d %d %v %v", c.ImageGCHighThresholdPercent, c.ImageGCLowThresholdPercent, c.ImageMinimumGCAge, c.ImageMaximumGCAge)
	}
}
