package config

import (
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateShutdown checks the graceful node shutdown periods as kubelet
// does: each 0 or at least 1s, the critical pods' part at most the whole;
// shutdownGracePeriodByPodPriority only with its gate and without them.
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
	byPrio := c.ShutdownGracePeriodByPodPriority
	bp := field.NewPath("shutdownGracePeriodByPodPriority")
	switch {
	case len(byPrio) == 0:
	case !c.FeatureEnabled(FeatureGracefulNodeShutdownBasedOnPodPriority):
		errs = append(errs, field.Forbidden(bp, "Specifying shutdownGracePeriodByPodPriority requires feature gate GracefulNodeShutdownBasedOnPodPriority"))
	case total > 0 || critical > 0:
		errs = append(errs, field.Forbidden(bp, "Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time"))
	}
	// kubelet does not check the bands; a negative grace period would
	// shorten the others' share of the inhibitor delay.
	for i, b := range byPrio {
		if b.ShutdownGracePeriodSeconds < 0 {
			errs = append(errs, field.Invalid(bp.Index(i).Child("shutdownGracePeriodSeconds"), b.ShutdownGracePeriodSeconds, "must not be negative"))
		}
	}
	return errs
}
