package config

import (
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateShutdown checks the graceful node shutdown periods as kubelet
// does: each 0 or at least 1s, the critical pods' part at most the whole.
func validateShutdown(c *NodeAgentConfiguration) field.ErrorList {
	var errs field.ErrorList
	total, critical := c.ShutdownGracePeriod.Duration, c.ShutdownGracePeriodCriticalPods.Duration
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"shutdownGracePeriod", total}, {"shutdownGracePeriodCriticalPods", critical}} {
		if f.d < 0 || (f.d > 0 && f.d < time.Second) {
			errs = append(errs, field.Invalid(field.NewPath(f.name), f.d.String(), "must be 0 (disabled) or at least 1s"))
		}
	}
	if critical > total {
		errs = append(errs, field.Invalid(field.NewPath("shutdownGracePeriodCriticalPods"), critical.String(),
			"must be less than or equal to shutdownGracePeriod ("+total.String()+")"))
	}
	return errs
}
