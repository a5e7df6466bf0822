package volume

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// isHugePagesMedium reports whether an emptyDir's medium is HugePages or
// HugePages-<size>.
func isHugePagesMedium(m v1.StorageMedium) bool {
	return m == v1.StorageMediumHugePages || strings.HasPrefix(string(m), string(v1.StorageMediumHugePagesPrefix))
}

// hugePagesMountOption is the hugetlbfs mount option ("pagesize=2Mi") of an
// emptyDir with medium HugePages or HugePages-<size>, from the pod's
// hugepages-<size> requests (its containers' and init containers'; they
// equal the limits), as kubelet's getPageSizeMountOption: HugePages takes
// the one size the pod requests (more than one is an error), HugePages-<size>
// needs a request of that size; with no matching request the volume
// cannot be set up.
func hugePagesMountOption(medium v1.StorageMedium, pod *v1.Pod) (string, error) {
	var want resource.Quantity
	if medium != v1.StorageMediumHugePages {
		s := strings.TrimPrefix(string(medium), string(v1.StorageMediumHugePagesPrefix))
		q, err := resource.ParseQuantity(s)
		if err != nil || q.Sign() <= 0 {
			return "", fmt.Errorf("medium %s: invalid huge page size %q", medium, s)
		}
		want = q
	}
	var (
		size  resource.Quantity
		found bool
	)
	cs := append(append([]v1.Container{}, pod.Spec.Containers...), pod.Spec.InitContainers...)
	for _, c := range cs {
		for name := range c.Resources.Requests {
			s, ok := strings.CutPrefix(string(name), v1.ResourceHugePagesPrefix)
			if !ok {
				continue
			}
			q, err := resource.ParseQuantity(s)
			if err != nil {
				return "", fmt.Errorf("resource %s: invalid huge page size %q", name, s)
			}
			if medium == v1.StorageMediumHugePages {
				if found && size.Cmp(q) != 0 {
					return "", fmt.Errorf("medium: %s can't be used if container requests multiple huge page sizes", medium)
				}
				size, found = q, true
			} else if q.Cmp(want) == 0 {
				size, found = q, true
			}
		}
	}
	if !found {
		return "", fmt.Errorf("medium %s: hugePages storage requested, but there is no resource request for huge pages", medium)
	}
	return "pagesize=" + size.String(), nil
}
