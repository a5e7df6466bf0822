package config

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Image garbage collection defaults (kubelet's).
const (
	DefaultImageGCHighThresholdPercent = 85
	DefaultImageGCLowThresholdPercent  = 80
	DefaultImageMinimumGCAge           = 2 * time.Minute
)

// validateImageGC checks the image garbage collection fields as kubelet's
// validation does.
func validateImageGC(c *NodeAgentConfiguration) field.ErrorList {
	var errs field.ErrorList
	high, low := c.ImageGCHighThresholdPercent, c.ImageGCLowThresholdPercent
	if high < 0 || high > 100 {
		errs = append(errs, field.Invalid(field.NewPath("imageGCHighThresholdPercent"), high, "must be between 0 and 100, inclusive"))
	}
	if low < 0 || low > 100 {
		errs = append(errs, field.Invalid(field.NewPath("imageGCLowThresholdPercent"), low, "must be between 0 and 100, inclusive"))
	}
	if low >= high {
		errs = append(errs, field.Invalid(field.NewPath("imageGCLowThresholdPercent"), low, fmt.Sprintf("must be less than imageGCHighThresholdPercent (%d)", high)))
	}
	if c.ImageMinimumGCAge.Duration < 0 {
		errs = append(errs, field.Invalid(field.NewPath("imageMinimumGCAge"), c.ImageMinimumGCAge.Duration.String(), "must be greater than or equal to 0"))
	}
	if maxAge := c.ImageMaximumGCAge.Duration; maxAge < 0 {
		errs = append(errs, field.Invalid(field.NewPath("imageMaximumGCAge"), maxAge.String(), "must not be negative"))
	} else if maxAge > 0 && maxAge <= c.ImageMinimumGCAge.Duration {
		errs = append(errs, field.Invalid(field.NewPath("imageMaximumGCAge"), maxAge.String(), fmt.Sprintf("must be greater than imageMinimumGCAge (%s)", c.ImageMinimumGCAge.Duration)))
	}
	return errs
}
