package containerspec

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/network"
)

// Env is what a container's environment is made of besides the pod and
// the container, as the worker resolved it.
type Env struct {
	NodeName string
	HostIPs  []string // status.hostIPs (status.hostIP is the first)
	PodIPs   []string // status.podIPs
	// Services are the cluster's Services (nil: none known, as kubelet
	// without an API server).
	Services []*v1.Service
	// Allocatable is the node's, the default of unset limits for
	// resourceFieldRef.
	Allocatable v1.ResourceList
	// ConfigMap and Secret read an object of the pod's namespace (nil: no
	// API server, kubelet's "no kubeClient defined").
	ConfigMap func(name string) (*v1.ConfigMap, error)
	Secret    func(name string) (*v1.Secret, error)
}

// makeEnv resolves a container's environment as kubelet
// (makeEnvironmentVariables): envFrom first, in order, each key
// (with its prefix) set from the ConfigMap's data or the Secret's; then
// env in order, each replacing what was set, a value expanded with $(VAR)
// over the variables set so far and the service variables, a valueFrom
// resolved from its source; then the service-link variables the container
// does not set. Optional sources that do not exist, and optional keys that
// are missing, set nothing. The error is kubelet's message for a missing
// required source or key, or a bad fieldRef/resourceFieldRef.
//
// Kubelet returns the variables in random (map) order; makeEnv returns
// the container's in the order first set, then the service variables
// sorted by name.
func makeEnv(pod *v1.Pod, c *v1.Container, in Env) ([]string, error) {
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	var serviceEnv map[string]string
	if in.Services != nil {
		serviceEnv = network.ServiceEnv(pod.Namespace, &links, in.Services)
	}
	vals := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	configMaps := map[string]*v1.ConfigMap{}
	secrets := map[string]*v1.Secret{}
	getConfigMap := func(name string, optional bool) (*v1.ConfigMap, bool, error) {
		if cm, ok := configMaps[name]; ok {
			return cm, true, nil
		}
		if in.ConfigMap == nil {
			return nil, false, fmt.Errorf("couldn't get configMap %s/%s, no kubeClient defined", pod.Namespace, name)
		}
		cm, err := in.ConfigMap(name)
		if err != nil {
			if optional && apierrors.IsNotFound(err) {
				return nil, false, nil
			}
			return nil, false, err
		}
		configMaps[name] = cm
		return cm, true, nil
	}
	getSecret := func(name string, optional bool) (*v1.Secret, bool, error) {
		if s, ok := secrets[name]; ok {
			return s, true, nil
		}
		if in.Secret == nil {
			return nil, false, fmt.Errorf("couldn't get secret %s/%s, no kubeClient defined", pod.Namespace, name)
		}
		s, err := in.Secret(name)
		if err != nil {
			if optional && apierrors.IsNotFound(err) {
				return nil, false, nil
			}
			return nil, false, err
		}
		secrets[name] = s
		return s, true, nil
	}

	for _, ef := range c.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			cm, ok, err := getConfigMap(ef.ConfigMapRef.Name, isTrue(ef.ConfigMapRef.Optional))
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
				set(ef.Prefix+k, cm.Data[k])
			}
		case ef.SecretRef != nil:
			s, ok, err := getSecret(ef.SecretRef.Name, isTrue(ef.SecretRef.Optional))
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			for _, k := range slices.Sorted(maps.Keys(s.Data)) {
				set(ef.Prefix+k, string(s.Data[k]))
			}
		}
	}

	lookup := func(k string) (string, bool) {
		if v, ok := vals[k]; ok {
			return v, true
		}
		v, ok := serviceEnv[k]
		return v, ok
	}
	for _, e := range c.Env {
		v := e.Value
		switch {
		case v != "":
			v = Expand(v, lookup)
		case e.ValueFrom == nil:
		case e.ValueFrom.FieldRef != nil:
			var err error
			if v, err = fieldRefValue(pod, e.ValueFrom.FieldRef, in); err != nil {
				return nil, err
			}
		case e.ValueFrom.ResourceFieldRef != nil:
			var err error
			if v, err = resourceFieldValue(pod, c, e.ValueFrom.ResourceFieldRef, in.Allocatable); err != nil {
				return nil, err
			}
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			optional := isTrue(ref.Optional)
			cm, ok, err := getConfigMap(ref.Name, optional)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			if v, ok = cm.Data[ref.Key]; !ok {
				if optional {
					continue
				}
				return nil, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)
			}
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			optional := isTrue(ref.Optional)
			s, ok, err := getSecret(ref.Name, optional)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			b, ok := s.Data[ref.Key]
			if !ok {
				if optional {
					continue
				}
				return nil, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
			}
			v = string(b)
		default:
			// Admission refuses the other sources (fileKeyRef).
			return nil, fmt.Errorf("env %s: unsupported valueFrom", e.Name)
		}
		set(e.Name, v)
	}

	out := make([]string, 0, len(order)+len(serviceEnv))
	for _, k := range order {
		out = append(out, k+"="+vals[k])
	}
	return network.MergeServiceEnv(out, serviceEnv), nil
}

func isTrue(b *bool) bool { return b != nil && *b }

// fieldRefValue is a downward API field of the pod, as kubelet's
// podFieldSelectorRuntimeValue: the pod's identity, labels['k'] and
// annotations['k'], spec.nodeName, spec.serviceAccountName, and the host
// and pod addresses (the plural ones comma-separated).
func fieldRefValue(pod *v1.Pod, fs *v1.ObjectFieldSelector, in Env) (string, error) {
	if fs.APIVersion != "" && fs.APIVersion != "v1" {
		return "", fmt.Errorf("unsupported pod version: %s", fs.APIVersion)
	}
	path := fs.FieldPath
	if v, ok := kubetypes.MetadataField(pod, path); ok {
		return v, nil
	}
	if k, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[k], nil
	}
	if k, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[k], nil
	}
	first := func(s []string) string {
		if len(s) > 0 {
			return s[0]
		}
		return ""
	}
	switch path {
	case "spec.nodeName":
		// kubelet reads the pod's; a static pod has none until the agent
		// sets it, so fall back to the node's name.
		if pod.Spec.NodeName != "" {
			return pod.Spec.NodeName, nil
		}
		return in.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return first(in.HostIPs), nil
	case "status.hostIPs":
		return strings.Join(in.HostIPs, ","), nil
	case "status.podIP":
		return first(in.PodIPs), nil
	case "status.podIPs":
		return strings.Join(in.PodIPs, ","), nil
	}
	return "", fmt.Errorf("field label not supported: %s", path)
}

// subscript splits "<base>['key']" into key.
func subscript(path, base string) (string, bool) {
	rest, ok := strings.CutPrefix(path, base+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

// resourceFieldValue is a container's resource request or limit in units
// of the divisor, rounded up, as kubelet: limits not set default to the
// pod-level limits, else the node's allocatable (kubelet's
// defaultPodLimitsForDownwardAPI).
func resourceFieldValue(pod *v1.Pod, c *v1.Container, fs *v1.ResourceFieldSelector, allocatable v1.ResourceList) (string, error) {
	allocatable = kubetypes.DownwardAPIAllocatable(pod, allocatable)
	target := c
	if fs.ContainerName != "" {
		target = nil
		for _, cs := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
			for i := range cs {
				if cs[i].Name == fs.ContainerName && target == nil {
					target = &cs[i]
				}
			}
		}
		if target == nil {
			return "", fmt.Errorf("container %s not found", fs.ContainerName)
		}
	}
	limits := v1.ResourceList{}
	for k, q := range target.Resources.Limits {
		limits[k] = q
	}
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage} {
		if q, ok := limits[name]; !ok || q.IsZero() {
			if a, ok := allocatable[name]; ok {
				limits[name] = a
			}
		}
	}
	divisor := fs.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	kind, name, ok := strings.Cut(fs.Resource, ".")
	var list v1.ResourceList
	switch {
	case ok && kind == "limits":
		list = limits
	case ok && kind == "requests":
		list = target.Resources.Requests
	}
	rn := v1.ResourceName(name)
	switch {
	case list == nil:
	case rn == v1.ResourceCPU:
		q := list[rn]
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	case rn == v1.ResourceMemory || rn == v1.ResourceEphemeralStorage || strings.HasPrefix(name, v1.ResourceHugePagesPrefix):
		q := list[rn]
		return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
	}
	return "", fmt.Errorf("unsupported container resource : %v", fs.Resource)
}
