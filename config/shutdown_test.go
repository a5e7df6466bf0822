package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestValidateShutdown(t *testing.T) {
	for _, tc := range []struct {
		desc            string
		total, critical time.Duration
		want            []string
	}{
		{desc: "disabled (default)"},
		{desc: "both set", total: 20 * time.Second, critical: 5 * time.Second},
		{desc: "no critical part", total: 20 * time.Second},
		{desc: "all for critical pods", total: 20 * time.Second, critical: 20 * time.Second},
		{desc: "critical above the whole", total: 10 * time.Second, critical: 20 * time.Second,
			want: []string{`shutdownGracePeriodCriticalPods: Invalid value: "20s": must be less than or equal to shutdownGracePeriod (10s)`}},
		{desc: "negative and below a second", total: -time.Second, critical: 500 * time.Millisecond,
			want: []string{
				`shutdownGracePeriod: Invalid value: "-1s": must be 0 (disabled) or at least 1s`,
				`shutdownGracePeriodCriticalPods: Invalid value: "500ms": must be 0 (disabled) or at least 1s`,
				`shutdownGracePeriodCriticalPods: Invalid value: "500ms": must be less than or equal to shutdownGracePeriod (-1s)`,
			}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := Default()
			c.ShutdownGracePeriod, c.ShutdownGracePeriodCriticalPods = dur(tc.total), dur(tc.critical)
			errs, _ := Validate(c)
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// A KubeletConfiguration's shutdown fields are used, not ignored.
func TestKubeletShutdownFields(t *testing.T) {
	for _, f := range []string{"shutdownGracePeriod", "shutdownGracePeriodCriticalPods", "shutdownGracePeriodByPodPriority"} {
		if !kubeletSupported[f] {
			t.Errorf("%s is not a supported KubeletConfiguration field", f)
		}
	}
}

// shutdownGracePeriodByPodPriority is read from a KubeletConfiguration
// without a warning, and refused as kubelet refuses it: with
// shutdownGracePeriod, or with its gate off.
func TestShutdownGracePeriodByPodPriority(t *testing.T) {
	const bands = "shutdownGracePeriodByPodPriority:\n- priority: 2000000000\n  shutdownGracePeriodSeconds: 10\n- priority: 0\n  shutdownGracePeriodSeconds: 20\n- priority: 100000\n  shutdownGracePeriodSeconds: 5\n"
	cfg, warnings, err := DecodeBytes("k.yaml", []byte(kubeletHdr+bands))
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) > 0 {
		t.Errorf("warnings: %q", warnings)
	}
	want := []ShutdownGracePeriodByPodPriority{{2000000000, 10}, {0, 20}, {100000, 5}}
	if !reflect.DeepEqual(cfg.ShutdownGracePeriodByPodPriority, want) {
		t.Errorf("decoded %+v, want %+v", cfg.ShutdownGracePeriodByPodPriority, want)
	}
	for _, tc := range []struct{ desc, content, want string }{
		{"with shutdownGracePeriod", kubeletHdr + bands + "shutdownGracePeriod: 30s\n",
			"Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time"},
		{"with shutdownGracePeriodCriticalPods", kubeletHdr + bands + "shutdownGracePeriodCriticalPods: 10s\n",
			"Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time"},
		{"gate off", kubeletHdr + bands + "featureGates:\n  GracefulNodeShutdownBasedOnPodPriority: false\n",
			"Specifying shutdownGracePeriodByPodPriority requires feature gate GracefulNodeShutdownBasedOnPodPriority"},
		{"negative", kubeletHdr + "shutdownGracePeriodByPodPriority:\n- priority: 0\n  shutdownGracePeriodSeconds: -1\n",
			"shutdownGracePeriodByPodPriority[0].shutdownGracePeriodSeconds: Invalid value: -1: must not be negative"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, _, err := DecodeBytes("k.yaml", []byte(tc.content))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// The gate off without bands is kubelet's behaviour too: accepted.
	if _, _, err := DecodeBytes("k.yaml", []byte(kubeletHdr+"shutdownGracePeriod: 30s\nfeatureGates:\n  GracefulNodeShutdownBasedOnPodPriority: false\n")); err != nil {
		t.Errorf("gate off without bands: %v", err)
	}
}
