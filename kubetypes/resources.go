package kubetypes

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// IsExtendedResourceName reports whether name is an extended resource
// (kubelet's v1helper.IsExtendedResourceName): a name outside the
// kubernetes.io/ namespace with a domain prefix ("example.com/gpu"), not
// "requests.*", that stays a qualified name with "requests." in front.
// Device plugins may only register such names.
func IsExtendedResourceName(name v1.ResourceName) bool {
	s := string(name)
	if !strings.Contains(s, "/") || strings.Contains(s, v1.ResourceDefaultNamespacePrefix) ||
		strings.HasPrefix(s, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+s)) == 0
}
