package source

import (
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/kubetypes"
)

// SetDefaults fills in the fields of pod that the API server defaults when a
// pod is created, for the fields nodeagent uses, so that a static pod looks
// like a pod read from the API server and its mirror pod passes the API
// server's validation unchanged. It never overwrites a field that is set.
//
// Pod: restartPolicy Always, terminationGracePeriodSeconds 30, dnsPolicy
// ClusterFirst, schedulerName default-scheduler, securityContext {},
// enableServiceLinks true. Containers and init containers:
// imagePullPolicy (Always for a ":latest" tag or an image with neither tag
// nor digest, IfNotPresent otherwise), terminationMessagePath
// /dev/termination-log, terminationMessagePolicy File, port protocol TCP
// (and hostPort = containerPort on hostNetwork pods), fieldRef apiVersion
// v1, requests copied from limits for every resource that has a limit but
// no request, quantities rounded up to milli-units. Pod-level resources:
// requests defaulted from the containers' requests or the pod-level limits
// (kubetypes.PodLevelRequests), rounded as the containers'. Volumes: a volume with
// no source is an emptyDir, a hostPath's type is "" (unset), an image
// volume's pullPolicy is the containers' default for its reference. An emptyDir's
// medium "" already means the node's default medium.
//
// It does not set priority: the API server derives it from the priority
// class, which a node agent cannot know.
func SetDefaults(pod *v1.Pod) {
	s := &pod.Spec
	if s.RestartPolicy == "" {
		s.RestartPolicy = v1.RestartPolicyAlways
	}
	if s.TerminationGracePeriodSeconds == nil {
		g := int64(v1.DefaultTerminationGracePeriodSeconds)
		s.TerminationGracePeriodSeconds = &g
	}
	if s.DNSPolicy == "" {
		s.DNSPolicy = v1.DNSClusterFirst
	}
	if s.SchedulerName == "" {
		s.SchedulerName = v1.DefaultSchedulerName
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &v1.PodSecurityContext{}
	}
	if s.EnableServiceLinks == nil {
		b := v1.DefaultEnableServiceLinks
		s.EnableServiceLinks = &b
	}
	for i := range s.InitContainers {
		defaultContainer(&s.InitContainers[i], s.HostNetwork)
	}
	for i := range s.Containers {
		defaultContainer(&s.Containers[i], s.HostNetwork)
	}
	if r := s.Resources; r != nil {
		roundUpMilli(r.Limits)
		roundUpMilli(r.Requests)
		r.Requests = kubetypes.PodLevelRequests(pod)
	}
	for i := range s.Volumes {
		vs := &s.Volumes[i].VolumeSource
		if *vs == (v1.VolumeSource{}) {
			vs.EmptyDir = &v1.EmptyDirVolumeSource{}
		}
		if vs.Image != nil && vs.Image.PullPolicy == "" {
			vs.Image.PullPolicy = defaultPullPolicy(vs.Image.Reference)
		}
		if vs.HostPath != nil && vs.HostPath.Type == nil {
			t := v1.HostPathUnset
			vs.HostPath.Type = &t
		}
	}
}

func defaultContainer(c *v1.Container, hostNetwork bool) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = v1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	for j := range c.Ports {
		p := &c.Ports[j]
		if p.Protocol == "" {
			p.Protocol = v1.ProtocolTCP
		}
		if hostNetwork && p.HostPort == 0 {
			p.HostPort = p.ContainerPort
		}
	}
	for j := range c.Env {
		if vf := c.Env[j].ValueFrom; vf != nil && vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1"
		}
	}
	roundUpMilli(c.Resources.Limits)
	roundUpMilli(c.Resources.Requests)
	if len(c.Resources.Limits) > 0 {
		if c.Resources.Requests == nil {
			c.Resources.Requests = make(v1.ResourceList, len(c.Resources.Limits))
		}
		for name, q := range c.Resources.Limits {
			if _, ok := c.Resources.Requests[name]; !ok {
				c.Resources.Requests[name] = q.DeepCopy()
			}
		}
	}
}

// roundUpMilli rounds every quantity up to a multiple of 1m, as the API
// server does (1.0001m becomes 2m).
func roundUpMilli(l v1.ResourceList) {
	for name, q := range l {
		q.RoundUp(-3)
		l[name] = q
	}
}

// defaultPullPolicy is Always when image names the tag "latest" or names
// neither a tag nor a digest (which means "latest"), IfNotPresent otherwise.
func defaultPullPolicy(image string) v1.PullPolicy {
	tag, digest := imageTag(image)
	if tag == "latest" || (tag == "" && !digest) {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}

// imageTag returns the tag of an image reference ("" if none) and whether
// the reference has a digest. A colon is a tag separator only after the
// last slash: in "registry:5000/busybox" it separates a port.
func imageTag(image string) (tag string, digest bool) {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image, digest = image[:i], true
	}
	name := image
	if i := strings.LastIndexByte(image, '/'); i >= 0 {
		name = image[i+1:]
	}
	if i := strings.LastIndexByte(name, ':'); i >= 0 {
		tag = name[i+1:]
	}
	return tag, digest
}
