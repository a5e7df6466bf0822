package source

import (
	"errors"
	"fmt"
	"path"
	"reflect"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeagent/nodeagent/pods/volume"
)

// ValidatePod checks the structure of what nodeagent runs, on a defaulted
// pod (see SetDefaults): metadata.name is a DNS-1123 subdomain and
// metadata.namespace a DNS-1123 label; there is at least one container;
// container and init container names are DNS-1123 labels, unique across
// both lists; every container has an image; env names are valid; ports are
// in range with a known protocol (and hostPort = containerPort on
// hostNetwork pods); volume names are unique DNS-1123 labels,
// each volume has exactly one source, a hostPath has an absolute path, a
// projected volume is well formed (see validateProjected);
// every volume mount names an existing volume and has an absolute
// mountPath, and a mountPropagation that is None, HostToContainer, or
// Bidirectional in a privileged container; resource quantities are non-negative and requests do not
// exceed limits (hugepages-<size>: equal them, in whole pages, beside a cpu
// or memory request or limit, as the API server validates); restartPolicy is Always, OnFailure or Never;
// terminationGracePeriodSeconds is not negative.
//
// It returns nil or every problem at once (errors.Join of *field.Error,
// each printed as "<field path>: <problem>"). It does not judge whether
// nodeagent supports the fields used: see admission.Unsupported.
func ValidatePod(pod *v1.Pod) error {
	errs := validatePod(pod)
	if len(errs) == 0 {
		return nil
	}
	all := make([]error, len(errs))
	for i, e := range errs {
		all[i] = e
	}
	return errors.Join(all...)
}

func validatePod(pod *v1.Pod) field.ErrorList {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	if pod.Name == "" {
		errs = append(errs, field.Required(meta.Child("name"), ""))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(pod.Name) {
			errs = append(errs, field.Invalid(meta.Child("name"), pod.Name, msg))
		}
	}
	if pod.Namespace == "" {
		errs = append(errs, field.Required(meta.Child("namespace"), ""))
	} else {
		for _, msg := range validation.IsDNS1123Label(pod.Namespace) {
			errs = append(errs, field.Invalid(meta.Child("namespace"), pod.Namespace, msg))
		}
	}

	spec := field.NewPath("spec")
	s := &pod.Spec
	volumes, volErrs := validateVolumes(s.Volumes, spec.Child("volumes"))
	errs = append(errs, volErrs...)
	if len(s.Containers) == 0 {
		errs = append(errs, field.Required(spec.Child("containers"), "a pod needs at least one container"))
	}
	names := sets.New[string]()
	for i := range s.InitContainers {
		errs = append(errs, validateContainer(&s.InitContainers[i], spec.Child("initContainers").Index(i), s.HostNetwork, names, volumes)...)
	}
	for i := range s.Containers {
		errs = append(errs, validateContainer(&s.Containers[i], spec.Child("containers").Index(i), s.HostNetwork, names, volumes)...)
	}

	switch s.RestartPolicy {
	case v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever:
	case "":
		errs = append(errs, field.Required(spec.Child("restartPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(spec.Child("restartPolicy"), s.RestartPolicy,
			[]v1.RestartPolicy{v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever}))
	}
	if g := s.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(spec.Child("terminationGracePeriodSeconds"), *g, "must be greater than or equal to 0"))
	}
	return errs
}

// validateVolumes returns the names of the volumes and their problems.
func validateVolumes(vols []v1.Volume, p *field.Path) (sets.Set[string], field.ErrorList) {
	var errs field.ErrorList
	names := sets.New[string]()
	for i := range vols {
		v := &vols[i]
		vp := p.Index(i)
		errs = append(errs, validateUniqueName(v.Name, vp.Child("name"), names)...)
		sources := setVolumeSources(&v.VolumeSource)
		switch {
		case len(sources) == 0:
			errs = append(errs, field.Required(vp, "must specify a volume type"))
		case len(sources) > 1:
			errs = append(errs, field.Forbidden(vp.Child(sources[1]), "may not specify more than 1 volume type"))
		}
		if hp := v.HostPath; hp != nil {
			hpp := vp.Child("hostPath", "path")
			if hp.Path == "" {
				errs = append(errs, field.Required(hpp, ""))
			} else if !path.IsAbs(hp.Path) {
				errs = append(errs, field.Invalid(hpp, hp.Path, "must be an absolute path"))
			}
		}
		if ed := v.EmptyDir; ed != nil && ed.SizeLimit != nil && ed.SizeLimit.Sign() < 0 {
			errs = append(errs, field.Invalid(vp.Child("emptyDir", "sizeLimit"), ed.SizeLimit.String(), "must be greater than or equal to 0"))
		}
		if pv := v.Projected; pv != nil {
			errs = append(errs, validateProjected(pv, vp.Child("projected"))...)
		}
	}
	return names, errs
}

// validateProjected checks a projected volume as the API server does, for
// the sources nodeagent supports: each source has exactly one kind; file
// paths are relative, without '..', not starting with '..' and unique in
// the volume; modes are within 0 and 0777; a token's expirationSeconds is
// at least 10 minutes and at most 2^32 seconds; a configMap has a name and
// its items a key; a downwardAPI item has a fieldRef or resourceFieldRef.
func validateProjected(pv *v1.ProjectedVolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	mode := func(fp *field.Path, m *int32) {
		if m != nil && (*m < 0 || *m > 0o777) {
			errs = append(errs, field.Invalid(fp, *m, "must be a number between 0 and 0777 (octal), both inclusive"))
		}
	}
	paths := sets.New[string]()
	filePath := func(fp *field.Path, path string) {
		if path == "" {
			errs = append(errs, field.Required(fp, ""))
			return
		}
		if err := volume.ValidatePayloadPath(path); err != nil {
			errs = append(errs, field.Invalid(fp, path, err.Error()))
			return
		}
		if paths.Has(path) {
			errs = append(errs, field.Invalid(fp, path, "conflicting duplicate paths"))
		}
		paths.Insert(path)
	}
	mode(p.Child("defaultMode"), pv.DefaultMode)
	for i := range pv.Sources {
		s := &pv.Sources[i]
		sp := p.Child("sources").Index(i)
		n := 0
		for _, set := range []bool{s.Secret != nil, s.DownwardAPI != nil, s.ConfigMap != nil,
			s.ServiceAccountToken != nil, s.ClusterTrustBundle != nil, s.PodCertificate != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			errs = append(errs, field.Forbidden(sp, "may have exactly one source"))
			continue
		}
		if t := s.ServiceAccountToken; t != nil {
			tp := sp.Child("serviceAccountToken")
			filePath(tp.Child("path"), t.Path)
			if e := t.ExpirationSeconds; e != nil && (*e < 600 || *e > 1<<32) {
				errs = append(errs, field.Invalid(tp.Child("expirationSeconds"), *e, "must be at least 600 and at most 4294967296 (2^32)"))
			}
		}
		if c := s.ConfigMap; c != nil {
			cp := sp.Child("configMap")
			if c.Name == "" {
				errs = append(errs, field.Required(cp.Child("name"), ""))
			}
			for j, item := range c.Items {
				ip := cp.Child("items").Index(j)
				if item.Key == "" {
					errs = append(errs, field.Required(ip.Child("key"), ""))
				}
				filePath(ip.Child("path"), item.Path)
				mode(ip.Child("mode"), item.Mode)
			}
		}
		if d := s.DownwardAPI; d != nil {
			for j, item := range d.Items {
				ip := sp.Child("downwardAPI", "items").Index(j)
				filePath(ip.Child("path"), item.Path)
				mode(ip.Child("mode"), item.Mode)
				if item.FieldRef == nil && item.ResourceFieldRef == nil {
					errs = append(errs, field.Required(ip.Child("fieldRef"), "one of fieldRef and resourceFieldRef is required"))
				}
			}
		}
	}
	return errs
}

// validateUniqueName checks a volume or container name: required, a
// DNS-1123 label, not in names (to which it is added).
func validateUniqueName(name string, p *field.Path, names sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	switch {
	case name == "":
		errs = append(errs, field.Required(p, ""))
	case names.Has(name):
		errs = append(errs, field.Duplicate(p, name))
	default:
		for _, msg := range validation.IsDNS1123Label(name) {
			errs = append(errs, field.Invalid(p, name, msg))
		}
	}
	names.Insert(name)
	return errs
}

// validateContainer checks one container; names holds the container names
// seen so far (it adds c's), volumes the pod's volume names.
func validateContainer(c *v1.Container, p *field.Path, hostNetwork bool, names, volumes sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateUniqueName(c.Name, p.Child("name"), names)...)
	if strings.TrimSpace(c.Image) == "" {
		errs = append(errs, field.Required(p.Child("image"), ""))
	} else if c.Image != strings.TrimSpace(c.Image) {
		errs = append(errs, field.Invalid(p.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	switch c.ImagePullPolicy {
	case v1.PullAlways, v1.PullIfNotPresent, v1.PullNever:
	case "":
		errs = append(errs, field.Required(p.Child("imagePullPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy,
			[]v1.PullPolicy{v1.PullAlways, v1.PullIfNotPresent, v1.PullNever}))
	}
	if c.WorkingDir != "" && !path.IsAbs(c.WorkingDir) {
		errs = append(errs, field.Invalid(p.Child("workingDir"), c.WorkingDir, "must be an absolute path"))
	}
	for i, port := range c.Ports {
		pp := p.Child("ports").Index(i)
		for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
			errs = append(errs, field.Invalid(pp.Child("containerPort"), port.ContainerPort, msg))
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort, msg))
			}
			if hostNetwork && port.HostPort != port.ContainerPort {
				errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort, "must match containerPort when hostNetwork is true"))
			}
		}
		switch port.Protocol {
		case v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
		default:
			errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol,
				[]v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}))
		}
	}
	for i, e := range c.Env {
		ep := p.Child("env").Index(i).Child("name")
		if e.Name == "" {
			errs = append(errs, field.Required(ep, ""))
			continue
		}
		for _, msg := range validation.IsEnvVarName(e.Name) {
			errs = append(errs, field.Invalid(ep, e.Name, msg))
		}
	}
	for i, m := range c.VolumeMounts {
		mp := p.Child("volumeMounts").Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(mp.Child("name"), ""))
		} else if !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(mp.Child("mountPath"), ""))
		} else if !path.IsAbs(m.MountPath) {
			errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be an absolute path"))
		}
		errs = append(errs, validateMountPropagation(m.MountPropagation, c, mp.Child("mountPropagation"))...)
	}
	errs = append(errs, validateResources(&c.Resources, p.Child("resources"))...)
	return errs
}

// validateMountPropagation: the API server's rules (which kubelet applies
// to static pods): a known mode, and Bidirectional only in a privileged
// container.
func validateMountPropagation(mode *v1.MountPropagationMode, c *v1.Container, p *field.Path) field.ErrorList {
	if mode == nil {
		return nil
	}
	switch *mode {
	case v1.MountPropagationNone, v1.MountPropagationHostToContainer:
	case v1.MountPropagationBidirectional:
		if sc := c.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
			return field.ErrorList{field.Forbidden(p, volume.BidirectionalNotPrivileged)}
		}
	default:
		return field.ErrorList{field.NotSupported(p, *mode, []v1.MountPropagationMode{
			v1.MountPropagationBidirectional, v1.MountPropagationHostToContainer, v1.MountPropagationNone})}
	}
	return nil
}

func validateResources(r *v1.ResourceRequirements, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, kind := range []struct {
		name string
		list v1.ResourceList
	}{{"limits", r.Limits}, {"requests", r.Requests}} {
		for _, name := range sortedNames(kind.list) {
			q := kind.list[name]
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(p.Child(kind.name).Key(string(name)), q.String(), "must be greater than or equal to 0"))
			}
		}
	}
	for _, name := range sortedNames(r.Requests) {
		req := r.Requests[name]
		lim, ok := r.Limits[name]
		switch {
		case isHugePages(name) && !ok:
			errs = append(errs, field.Required(p.Child("limits"), "Limit must be set for non overcommitable resources"))
		case isHugePages(name) && req.Cmp(lim) != 0:
			errs = append(errs, field.Invalid(p.Child("requests"), req.String(),
				fmt.Sprintf("must be equal to %s limit of %s", name, lim.String())))
		// A negative limit is reported above.
		case ok && lim.Sign() >= 0 && req.Cmp(lim) > 0:
			errs = append(errs, field.Invalid(p.Child("requests").Key(string(name)), req.String(),
				fmt.Sprintf("must be less than or equal to %s limit of %s", name, lim.String())))
		}
	}
	// Huge pages as the API server validates them: whole pages, and only
	// beside cpu or memory.
	huge, cpuOrMemory := false, false
	for _, kind := range []struct {
		name string
		list v1.ResourceList
	}{{"limits", r.Limits}, {"requests", r.Requests}} {
		for _, name := range sortedNames(kind.list) {
			switch {
			case name == v1.ResourceCPU || name == v1.ResourceMemory:
				cpuOrMemory = true
			case isHugePages(name):
				huge = true
				if q := kind.list[name]; !hugePagesDivisible(name, q) {
					errs = append(errs, field.Invalid(p.Child(kind.name).Key(string(name)), q.String(),
						fmt.Sprintf("%s is not positive integer multiple of %s", q.String(), name)))
				}
			}
		}
	}
	if huge && !cpuOrMemory {
		errs = append(errs, field.Forbidden(p, "HugePages require cpu or memory"))
	}
	return errs
}

// isHugePages reports whether name is a hugepages-<size> resource.
func isHugePages(name v1.ResourceName) bool {
	return strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

// hugePagesDivisible reports whether q is a whole number of name's pages
// (0 is; a size that does not parse is not).
func hugePagesDivisible(name v1.ResourceName, q resource.Quantity) bool {
	size, err := resource.ParseQuantity(strings.TrimPrefix(string(name), v1.ResourceHugePagesPrefix))
	if err != nil || size.Value() <= 0 {
		return false
	}
	return q.Value()%size.Value() == 0
}

func sortedNames(l v1.ResourceList) []v1.ResourceName {
	names := make([]v1.ResourceName, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// setVolumeSources returns the JSON names of the sources set in vs (every
// source is a pointer field).
func setVolumeSources(vs *v1.VolumeSource) []string {
	var names []string
	v := reflect.ValueOf(vs).Elem()
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			names = append(names, strings.Split(v.Type().Field(i).Tag.Get("json"), ",")[0])
		}
	}
	return names
}
