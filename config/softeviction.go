package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateSoftEviction checks evictionSoft, evictionSoftGracePeriod and
// evictionMinimumReclaim as kubelet's ParseThresholdConfig does, with its
// messages: soft thresholds in evictionHard's syntax, each with a grace
// period that is a non-negative duration, minimum reclaims a
// non-negative quantity or a positive percentage. The warnings name
// settings that are accepted but have no effect or not the expected one.
func validateSoftEviction(c *NodeAgentConfiguration) (field.ErrorList, []string) {
	var warnings []string
	errs := validateEviction(c.EvictionSoft, field.NewPath("evictionSoft"))
	gp := field.NewPath("evictionSoftGracePeriod")
	for _, k := range slices.Sorted(maps.Keys(c.EvictionSoft)) {
		v := c.EvictionSoft[k]
		if v == "0%" || v == "100%" || len(validateEviction(map[string]string{k: v}, field.NewPath("evictionSoft"))) > 0 {
			continue // ignored (as kubelet), or already an error
		}
		if _, ok := c.EvictionSoftGracePeriod[k]; !ok {
			errs = append(errs, field.Required(gp.Key(k), "grace period must be specified for the soft eviction threshold "+k))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.EvictionSoftGracePeriod)) {
		kp, v := gp.Key(k), c.EvictionSoftGracePeriod[k]
		if !contains(evictionSignals, k) {
			errs = append(errs, field.NotSupported(kp, k, evictionSignals))
			continue
		}
		if _, ok := c.EvictionSoft[k]; !ok {
			warnings = append(warnings, fmt.Sprintf("%s: no soft threshold for %s in evictionSoft; the grace period is not used", kp, k))
		}
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(kp, v, "must be a duration such as \"1m30s\""))
		case d < 0:
			errs = append(errs, field.Invalid(kp, v, fmt.Sprintf("invalid eviction grace period specified: %v, must be a positive value", v)))
		}
	}
	mp := field.NewPath("evictionMinimumReclaim")
	for _, k := range slices.Sorted(maps.Keys(c.EvictionMinimumReclaim)) {
		kp, v := mp.Key(k), c.EvictionMinimumReclaim[k]
		if !contains(evictionSignals, k) {
			errs = append(errs, field.NotSupported(kp, k, evictionSignals))
			continue
		}
		if pct, ok := strings.CutSuffix(v, "%"); ok {
			f, err := strconv.ParseFloat(pct, 64)
			switch {
			case !numericRE.MatchString(pct) || err != nil:
				errs = append(errs, field.Invalid(kp, v, "must be a percentage such as \"5%\" or a quantity such as \"500Mi\""))
			case f <= 0:
				errs = append(errs, field.Invalid(kp, v, fmt.Sprintf("eviction percentage minimum reclaim %s must be positive: %s", k, v)))
			case f > 100:
				errs = append(errs, field.Invalid(kp, v, "must be a percentage between 0% and 100%"))
			}
			continue
		}
		q, err := resource.ParseQuantity(v)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(kp, v, "must be a percentage such as \"5%\" or a quantity such as \"500Mi\""))
		case q.Sign() < 0:
			errs = append(errs, field.Invalid(kp, v, "negative eviction minimum reclaim specified for "+k))
		}
	}
	if c.EvictionMaxPodGracePeriod < 0 {
		// Accepted, as kubelet does; its flag says a negative value defers
		// to the pod's grace period, but its code kills with 1s.
		warnings = append(warnings, fmt.Sprintf("evictionMaxPodGracePeriod: %d gives pods evicted for a soft threshold a 1s grace period, as kubelet's code does (its flag's help says a negative value defers to the pod's)", c.EvictionMaxPodGracePeriod))
	}
	return errs, warnings
}

// SoftGracePeriods returns evictionSoftGracePeriod parsed (valid
// configurations only: an entry that does not parse is left out).
func (c *NodeAgentConfiguration) SoftGracePeriods() map[string]time.Duration {
	out := map[string]time.Duration{}
	for k, v := range c.EvictionSoftGracePeriod {
		if d, err := time.ParseDuration(v); err == nil {
			out[k] = d
		}
	}
	return out
}
