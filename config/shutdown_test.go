package config

import (
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
	for _, f := range []string{"shutdownGracePeriod", "shutdownGracePeriodCriticalPods"} {
		if !kubeletSupported[f] {
			t.Errorf("%s is not a supported KubeletConfiguration field", f)
		}
	}
}
