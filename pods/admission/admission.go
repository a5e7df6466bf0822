package admission

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodeagent/nodeagent/kubetypes"
)

// Reasons of admission refusals (kubelet's vocabulary).
const (
	// Admission refusal of fields outside the supported subset. Resource
	// refusals are "OutOf" + the resource name (OutOfpods, OutOfcpu), as
	// kubelet spells them (FitsNode).
	ReasonUnsupportedPodSpec = "UnsupportedPodSpec"
	// ReasonUnexpectedAdmissionError: the device plugins' allocation
	// failed ("Allocate failed due to <err>, which is unexpected").
	ReasonUnexpectedAdmissionError = "UnexpectedAdmissionError"
	// The node's allocatable could not be read (kubelet's reason).
	ReasonInvalidNodeInfo = "InvalidNodeInfo"
)

// FitsNode is kubelet's resource admission: whether pod fits on a node with
// allocatable resources and room for maxPods pods next to the admitted
// pods (the pods already admitted and not terminal; the caller filters
// them; an entry with pod's own UID is ignored). maxPods ≤ 0 means no limit
// on the number of pods.
//
// A pod's requests are its effective requests as the scheduler computes
// them (component-helpers PodRequests: the sum over app containers and
// sidecars, at least what the largest init container needs next to the
// sidecars declared before it, plus overhead), where a container with
// a limit and no request for a resource requests its limit (the API
// server's defaulting). A resource the pod does not request is not checked.
//
// On refusal, reason is kubelet's ("OutOfpods", "OutOfcpu", "OutOfmemory",
// "OutOfephemeral-storage", "OutOf<resource>" for others) and message is
// the pod status message, "Pod was rejected: Node didn't have enough
// resource: <resource>, requested: R, used: U, capacity: C" (cpu in
// millicores, others in units). The first insufficient resource is
// reported, in the order pods, cpu, memory, ephemeral-storage, then others
// by name.
func FitsNode(pod *v1.Pod, admitted []*v1.Pod, allocatable v1.ResourceList, maxPods int) (ok bool, reason, message string) {
	others := make([]*v1.Pod, 0, len(admitted))
	for _, p := range admitted {
		if p == nil || (pod.UID != "" && p.UID == pod.UID) {
			continue
		}
		others = append(others, p)
	}
	reject := func(name v1.ResourceName, requested, used, capacity int64) (bool, string, string) {
		return false, "OutOf" + string(name), fmt.Sprintf(
			"Pod was rejected: Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
			name, requested, used, capacity)
	}
	if maxPods > 0 && len(others)+1 > maxPods {
		return reject(v1.ResourcePods, 1, int64(len(others)), int64(maxPods))
	}

	want := podRequests(pod)
	// kubelet drops the requests of extended resources the node does not
	// have (removeMissingExtendedResources): cluster-level resources
	// unknown to nodes, scheduler extenders, DRA.
	for name := range want {
		if _, ok := allocatable[name]; !ok && kubetypes.IsExtendedResourceName(name) {
			delete(want, name)
		}
	}
	used := v1.ResourceList{}
	for _, p := range others {
		for name, q := range podRequests(p) {
			u := used[name]
			u.Add(q)
			used[name] = u
		}
	}
	order := []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		switch name {
		case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, v1.ResourcePods:
		default:
			order = append(order, name)
		}
	}
	value := func(name v1.ResourceName, q resource.Quantity) int64 {
		if name == v1.ResourceCPU {
			return q.MilliValue()
		}
		return q.Value()
	}
	for _, name := range order {
		r, ok := want[name]
		if !ok || r.Sign() <= 0 {
			continue
		}
		req := value(name, r)
		u := value(name, used[name])
		capacity := value(name, allocatable[name])
		if req > capacity-u {
			return reject(name, req, u, capacity)
		}
	}
	return true, "", ""
}

// podRequests is the pod's effective requests; limits count as requests
// where a container has a limit and no request.
func podRequests(pod *v1.Pod) v1.ResourceList {
	if needsRequestDefaults(pod) {
		pod = pod.DeepCopy()
		for i := range pod.Spec.InitContainers {
			defaultRequests(&pod.Spec.InitContainers[i].Resources)
		}
		for i := range pod.Spec.Containers {
			defaultRequests(&pod.Spec.Containers[i].Resources)
		}
	}
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

func needsRequestDefaults(pod *v1.Pod) bool {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			for name := range cs[i].Resources.Limits {
				if _, ok := cs[i].Resources.Requests[name]; !ok {
					return true
				}
			}
		}
	}
	return false
}

func defaultRequests(r *v1.ResourceRequirements) {
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			if r.Requests == nil {
				r.Requests = v1.ResourceList{}
			}
			r.Requests[name] = q.DeepCopy()
		}
	}
}

// check is one field of a T that nodeagent does not support: field is its
// JSON name, used reports whether a value uses it.
type check[T any] struct {
	field string
	used  func(*T) bool
}

// The tables below classify every field of the structures a pod spec is
// made of: a field is either in the "accepted" list (used as is, or walked
// further by Unsupported) or in the table of unsupported checks. A test
// fails when k8s.io/api gains a field that is in neither, so that a new
// field is refused or accepted on purpose, never by omission.

// podSpecAccepted: PodSpec fields nodeagent runs with or that concern the
// scheduler or the API server rather than the node. containers,
// initContainers, volumes, securityContext and os are walked further.
// enableServiceLinks, dnsPolicy, dnsConfig, hostname, subdomain,
// setHostnameAsFQDN and hostAliases make the containers' environment and
// name-service files as in kubelet.
var podSpecAccepted = []string{
	"volumes", "initContainers", "containers", "restartPolicy", "terminationGracePeriodSeconds",
	"dnsPolicy", "nodeSelector", "serviceAccountName", "serviceAccount", "automountServiceAccountToken",
	"nodeName", "hostNetwork", "securityContext", "affinity", "schedulerName", "tolerations",
	"priorityClassName", "priority", "enableServiceLinks", "preemptionPolicy",
	"topologySpreadConstraints", "os", "schedulingGates",
	// The Workload a pod belongs to (gang scheduling, alpha in 1.35): the
	// scheduler's, not the node's.
	"workloadRef",
	"hostname", "subdomain", "hostAliases", "dnsConfig", "setHostnameAsFQDN",
	// Host namespaces and the OS (AdmitSecurity refuses OSes other than
	// linux) are in the security subset (see Unsupported).
	"hostPID", "hostIPC",
	// One PID namespace for the pod, held by a pause process
	// (pods/podns.go).
	"shareProcessNamespace",
	// runtimeClassName picks the containerd runtime (config
	// runtimeHandlers); its overhead counts in FitsNode.
	"runtimeClassName", "overhead",
	"activeDeadlineSeconds", "readinessGates",
	// imagePullSecrets: credentials for pulls (pods/images.go).
	"imagePullSecrets",
	// Ephemeral containers (kubectl debug) are walked as containers.
	"ephemeralContainers",
	// Pod-level resources (PodLevelResources, on by default in 1.34):
	// cpu and memory for the pod cgroup, QoS, admission and eviction
	// (kubetypes/podlevel.go); walked for the resource names.
	"resources",
	// A user namespace per pod with hostUsers: false (package userns);
	// unsupportedUserNamespace refuses what cannot go with it.
	"hostUsers",
}

var podSpecChecks = []check[v1.PodSpec]{
	{"resourceClaims", func(s *v1.PodSpec) bool { return len(s.ResourceClaims) > 0 }},
	{"hostnameOverride", func(s *v1.PodSpec) bool { return s.HostnameOverride != nil }},
}

// podSecurityContextAccepted: the pod's securityContext fields nodeagent
// applies as kubelet does (see containerspec.containerSecurity). sysctls and
// appArmorProfile pass AdmitSecurity first; seLinuxOptions and
// seLinuxChangePolicy are refused by AdmitSecurity on SELinux hosts and
// ignored elsewhere (as a runtime without SELinux does); windowsOptions
// are ignored on Linux, as kubelet does.
var podSecurityContextAccepted = []string{
	"seLinuxOptions", "windowsOptions", "runAsUser", "runAsGroup", "runAsNonRoot",
	"supplementalGroups", "supplementalGroupsPolicy", "fsGroup", "sysctls", "fsGroupChangePolicy",
	"seccompProfile", "appArmorProfile", "seLinuxChangePolicy",
}

var podSecurityContextChecks = []check[v1.PodSecurityContext]{}

// containerAccepted: Container fields nodeagent runs with; ports, env,
// resources, volumeMounts and securityContext are walked further.
var containerAccepted = []string{
	"name", "image", "command", "args", "workingDir", "ports", "env", "resources", "volumeMounts",
	"terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy", "securityContext",
	"envFrom",
	"livenessProbe", "readinessProbe", "startupProbe", "lifecycle",
	// Always on an init container makes a sidecar; anything else is
	// refused by unsupportedRestartPolicy.
	"restartPolicy",
	// An open stdin for attach sessions and a terminal (runtime stdio).
	"stdin", "stdinOnce", "tty",
	// In-place resize (package resize): NotRequired and RestartContainer
	// for cpu and memory, the only resources the API server accepts.
	"resizePolicy",
	// Raw block volumes of persistentVolumeClaim and ephemeral volumes
	// (csi's block.go).
	"volumeDevices",
}

var containerChecks = []check[v1.Container]{
	{"restartPolicyRules", func(c *v1.Container) bool { return len(c.RestartPolicyRules) > 0 }},
}

// securityContextAccepted: the container securityContext fields nodeagent
// applies (as podSecurityContextAccepted says for the shared ones).
var securityContextAccepted = []string{
	"capabilities", "privileged", "seLinuxOptions", "windowsOptions", "runAsUser", "runAsGroup",
	"runAsNonRoot", "readOnlyRootFilesystem", "allowPrivilegeEscalation", "seccompProfile",
	"appArmorProfile",
	// Default, or Unmasked with hostUsers: false (unsupportedUserNamespace).
	"procMount",
}

var securityContextChecks = []check[v1.SecurityContext]{}

// containerPortAccepted: a containerPort is informative. hostPort (and
// hostIP) is the port itself on hostNetwork pods, else a port mapping the
// CNI network's portmap plugin makes (portMappings capability).
var containerPortAccepted = []string{"name", "containerPort", "protocol", "hostPort", "hostIP"}

var containerPortChecks = []check[v1.ContainerPort]{}

// envVarSourceAccepted: fieldRef is accepted for the paths in
// supportedFieldPaths (and metadata.labels['k'], metadata.annotations['k'])
// only.
var envVarSourceAccepted = []string{"fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef"}

var envVarSourceChecks = []check[v1.EnvVarSource]{
	{"fileKeyRef", func(s *v1.EnvVarSource) bool { return s.FileKeyRef != nil }},
}

// supportedFieldPaths are the fieldRef paths nodeagent resolves.
var supportedFieldPaths = sets.New(
	"metadata.name", "metadata.namespace", "metadata.uid",
	"spec.nodeName", "spec.serviceAccountName", "status.hostIP", "status.hostIPs",
	"status.podIP", "status.podIPs",
)

// supportedFieldPath reports whether an env fieldRef path is resolved:
// one of supportedFieldPaths or a subscripted label or annotation.
func supportedFieldPath(p string) bool {
	if supportedFieldPaths.Has(p) {
		return true
	}
	for _, base := range []string{"metadata.labels['", "metadata.annotations['"} {
		if k, ok := strings.CutPrefix(p, base); ok && strings.HasSuffix(k, "']") && len(k) > 2 {
			return true
		}
	}
	return false
}

// volumeMountAccepted: subPath and subPathExpr (expanded with the
// container's env) are mounted safely inside the volume; mountPropagation
// is kubelet's (None, HostToContainer, Bidirectional in privileged
// containers; see volume.Propagation).
var volumeMountAccepted = []string{"name", "readOnly", "mountPath", "subPath", "subPathExpr", "mountPropagation"}

var volumeMountChecks = []check[v1.VolumeMount]{
	// Disabled is what nodeagent does anyway.
	{"recursiveReadOnly", func(m *v1.VolumeMount) bool {
		return m.RecursiveReadOnly != nil && *m.RecursiveReadOnly != v1.RecursiveReadOnlyDisabled
	}},
}

// resourceRequirementsAccepted: limits and requests are walked for their
// resource names (see limitResources, requestResources).
var resourceRequirementsAccepted = []string{"limits", "requests"}

var resourceRequirementsChecks = []check[v1.ResourceRequirements]{
	{"claims", func(r *v1.ResourceRequirements) bool { return len(r.Claims) > 0 }},
}

// Resources a container may name. cpu and memory limits become cgroup
// limits; an ephemeral-storage request counts for admission and its limit
// is enforced by eviction (package eviction, localStorageEviction).
// Extended resources (kubetypes.IsExtendedResourceName) are accepted too:
// device plugins' resources are allocated at admission, others count in
// FitsNode when the node has them. So are hugepages-<size>: they count in
// FitsNode against the node's allocatable of that size (OutOfhugepages-2Mi
// as kubelet), and become the pod cgroup's hugetlb limits (package cm).
// Pod-level resources are cpu and memory; the API server also accepts
// hugepages-* there, which nodeagent refuses by name.
var (
	limitResources    = sets.New(v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage)
	requestResources  = sets.New(v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage)
	podLevelResources = sets.New(v1.ResourceCPU, v1.ResourceMemory)
)

// volumeSourceAccepted: the volume types nodeagent mounts; emptyDir,
// projected and downwardAPI are walked further (emptyDir's medium and
// sizeLimit, projected sources, downwardAPI items); secret, configMap,
// persistentVolumeClaim (claimName, readOnly), ephemeral (its claim, made
// by the ephemeral volume controller from volumeClaimTemplate) and csi
// (driver, readOnly, fsType, volumeAttributes, nodePublishSecretRef;
// package csi) are used whole, and so are the in-tree sources kubelet 1.34
// mounts through CSI migration (translated to their CSI driver's volume by
// package csi).
var volumeSourceAccepted = []string{"hostPath", "emptyDir", "projected", "secret", "configMap", "downwardAPI",
	"persistentVolumeClaim", "csi", "ephemeral",
	"awsElasticBlockStore", "gcePersistentDisk", "azureDisk", "azureFile", "vsphereVolume", "cinder", "portworxVolume",
	// image (reference, pullPolicy): mounted read-only when the ImageVolume
	// feature gate is on (pods/imagevolumes.go), refused by AdmitFeatures
	// when it is off.
	"image"}

var volumeSourceChecks = []check[v1.VolumeSource]{
	{"gitRepo", func(s *v1.VolumeSource) bool { return s.GitRepo != nil }},
	{"nfs", func(s *v1.VolumeSource) bool { return s.NFS != nil }},
	{"iscsi", func(s *v1.VolumeSource) bool { return s.ISCSI != nil }},
	{"glusterfs", func(s *v1.VolumeSource) bool { return s.Glusterfs != nil }},
	{"rbd", func(s *v1.VolumeSource) bool { return s.RBD != nil }},
	{"flexVolume", func(s *v1.VolumeSource) bool { return s.FlexVolume != nil }},
	{"cephfs", func(s *v1.VolumeSource) bool { return s.CephFS != nil }},
	{"flocker", func(s *v1.VolumeSource) bool { return s.Flocker != nil }},
	{"fc", func(s *v1.VolumeSource) bool { return s.FC != nil }},
	{"quobyte", func(s *v1.VolumeSource) bool { return s.Quobyte != nil }},
	{"photonPersistentDisk", func(s *v1.VolumeSource) bool { return s.PhotonPersistentDisk != nil }},
	{"scaleIO", func(s *v1.VolumeSource) bool { return s.ScaleIO != nil }},
	{"storageos", func(s *v1.VolumeSource) bool { return s.StorageOS != nil }},
}

// A Memory emptyDir is a tmpfs of sizeLimit; on disk eviction enforces
// it (package eviction, localStorageEviction).
var emptyDirAccepted = []string{"medium", "sizeLimit"}

var emptyDirChecks = []check[v1.EmptyDirVolumeSource]{}

var hostPathAccepted = []string{"path", "type"}

// projectedAccepted: a projected volume's sources are walked further.
var projectedAccepted = []string{"sources", "defaultMode"}

// volumeProjectionAccepted: serviceAccountToken, configMap and secret are
// used as they are; downwardAPI items are walked further.
var volumeProjectionAccepted = []string{"serviceAccountToken", "configMap", "downwardAPI", "secret"}

var volumeProjectionChecks = []check[v1.VolumeProjection]{
	{"clusterTrustBundle", func(s *v1.VolumeProjection) bool { return s.ClusterTrustBundle != nil }},
	{"podCertificate", func(s *v1.VolumeProjection) bool { return s.PodCertificate != nil }},
}

// downwardAPIFileAccepted: fieldRef is accepted for the paths in
// downwardAPIFieldPaths (and single labels and annotations) only;
// resourceFieldRef for any container resource the Downward API defines.
var downwardAPIFileAccepted = []string{"path", "fieldRef", "mode", "resourceFieldRef"}

var downwardAPIFileChecks = []check[v1.DownwardAPIVolumeFile]{}

// downwardAPIFieldPaths are the fieldRef paths a downwardAPI item may name,
// besides metadata.labels['<key>'] and metadata.annotations['<key>'].
var downwardAPIFieldPaths = sets.New(
	"metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels", "metadata.annotations",
)

// downwardAPIFieldPath reports whether a downwardAPI volume item may name
// path.
func downwardAPIFieldPath(path string) bool {
	if downwardAPIFieldPaths.Has(path) {
		return true
	}
	for _, prefix := range []string{"metadata.labels['", "metadata.annotations['"} {
		if k, ok := strings.CutPrefix(path, prefix); ok && strings.HasSuffix(k, "']") && len(k) > 2 {
			return true
		}
	}
	return false
}

// walk adds p.<field> for every check that v uses.
func walk[T any](v *T, checks []check[T], p *field.Path, add func(*field.Path)) {
	if v == nil {
		return
	}
	for _, c := range checks {
		if c.used(v) {
			add(p.Child(c.field))
		}
	}
}

// Unsupported returns the field paths of everything pod uses that nodeagent
// does not support, sorted; nil if it supports the whole pod. pod should be
// defaulted (source.SetDefaults, or read from the API server).
//
// The supported subset (issue 6, "What a pod may use"): containers and
// init containers with name, image, imagePullPolicy (imagePullSecrets for
// the pulls), command, args,
// workingDir, env (value; valueFrom configMapKeyRef, secretKeyRef,
// resourceFieldRef, or fieldRef to metadata.name, metadata.namespace,
// metadata.uid, metadata.labels['k'], metadata.annotations['k'],
// spec.nodeName, spec.serviceAccountName, status.hostIP(s) or
// status.podIP(s)), envFrom (configMapRef, secretRef, prefix),
// containerPort (informative), resources (limits on cpu, memory and
// ephemeral-storage, requests on cpu, memory and ephemeral-storage), volumeMounts (name,
// mountPath, readOnly, subPath, subPathExpr), livenessProbe, readinessProbe,
// startupProbe (exec, httpGet, tcpSocket, grpc), lifecycle (postStart and
// preStop with exec, httpGet or sleep), terminationMessagePath and
// terminationMessagePolicy, stdin, stdinOnce and tty; sidecars (init
// containers with restartPolicy Always); ephemeral containers (kubectl
// debug; the same container fields, and targetContainerName);
// restartPolicy; terminationGracePeriodSeconds; activeDeadlineSeconds;
// readinessGates; hostNetwork; hostPort and hostIP (through the CNI
// portMappings capability without hostNetwork); volumes emptyDir (medium ""
// or Memory; sizeLimit: the tmpfs size with Memory, enforced by eviction on
// disk), hostPath, persistentVolumeClaim, ephemeral and csi (package csi),
// secret, configMap, downwardAPI
// (fieldRef to metadata.name, metadata.namespace, metadata.uid,
// metadata.labels, metadata.annotations or one label or annotation;
// resourceFieldRef) and projected with serviceAccountToken, secret,
// configMap and downwardAPI sources (the API server's ServiceAccount
// admission adds such a volume to pods: kube-api-access-*); the pod's
// name service: dnsPolicy, dnsConfig, hostname, subdomain,
// setHostnameAsFQDN, hostAliases, enableServiceLinks; the pod's and
// containers' securityContext (runAsUser, runAsGroup, runAsNonRoot,
// supplementalGroups and its policy, fsGroup, sysctls, capabilities,
// privileged, allowPrivilegeEscalation, readOnlyRootFilesystem, procMount
// (Unmasked with hostUsers: false), seccompProfile, appArmorProfile; seLinuxOptions and
// windowsOptions ignored), hostPID, hostIPC and shareProcessNamespace;
// hostUsers (false: a user namespace of the pod's own);
// runtimeClassName (its
// handler must be in the config's runtimeHandlers, or the pod does not
// start) and overhead (counted by FitsNode); os (AdmitSecurity refuses
// an OS other than linux, sysctls that are not allowed and AppArmor
// profiles on hosts without AppArmor, with kubelet's reasons). Fields for
// the scheduler or the API server (nodeSelector,
// affinity, tolerations, priority, priorityClassName, schedulerName,
// topologySpreadConstraints, schedulingGates, serviceAccountName,
// automountServiceAccountToken, ...) are accepted and ignored.
//
// Everything else is unsupported: valueFrom fileKeyRef and fieldRefs
// other than the above, procMount Unmasked without hostUsers: false,
// hostNetwork, hostPID, hostIPC or shareProcessNamespace with it,
// a restartPolicy on a regular container or other than Always on an init
// container (ContainerRestartRules), mount propagation, pod-level
// resources other than cpu and memory, every other volume
// type, and the projected sources clusterTrustBundle and podCertificate
// (named as spec.volumes[N].projected.sources[M].clusterTrustBundle, ...).
func Unsupported(pod *v1.Pod) []string {
	seen := sets.New[string]()
	add := func(p *field.Path) { seen.Insert(p.String()) }
	spec := field.NewPath("spec")
	s := &pod.Spec
	walk(s, podSpecChecks, spec, add)
	walk(s.SecurityContext, podSecurityContextChecks, spec.Child("securityContext"), add)
	for i := range s.InitContainers {
		unsupportedContainer(&s.InitContainers[i], spec.Child("initContainers").Index(i), s.HostNetwork, add)
	}
	for i := range s.Containers {
		unsupportedContainer(&s.Containers[i], spec.Child("containers").Index(i), s.HostNetwork, add)
	}
	unsupportedRestartPolicy(s, spec, add)
	if r := s.Resources; r != nil {
		rp := spec.Child("resources")
		walk(r, resourceRequirementsChecks, rp, add)
		for _, l := range []struct {
			name string
			list v1.ResourceList
		}{{"limits", r.Limits}, {"requests", r.Requests}} {
			for name := range l.list {
				if !podLevelResources.Has(name) {
					add(rp.Child(l.name).Key(string(name)))
				}
			}
		}
	}
	unsupportedUserNamespace(s, spec, add)
	for i := range s.EphemeralContainers {
		c := v1.Container(s.EphemeralContainers[i].EphemeralContainerCommon)
		unsupportedContainer(&c, spec.Child("ephemeralContainers").Index(i), s.HostNetwork, add)
	}
	for i := range s.Volumes {
		vp := spec.Child("volumes").Index(i)
		vs := &s.Volumes[i].VolumeSource
		walk(vs, volumeSourceChecks, vp, add)
		if ed := vs.EmptyDir; ed != nil {
			walk(ed, emptyDirChecks, vp.Child("emptyDir"), add)
			if ed.Medium != v1.StorageMediumDefault && ed.Medium != v1.StorageMediumMemory && !isHugePagesMedium(ed.Medium) {
				add(vp.Child("emptyDir", "medium"))
			}
		}
		if pv := vs.Projected; pv != nil {
			unsupportedProjected(pv, vp.Child("projected"), add)
		}
		if d := vs.DownwardAPI; d != nil {
			unsupportedDownwardAPIItems(d.Items, vp.Child("downwardAPI", "items"), add)
		}
	}
	if seen.Len() == 0 {
		return nil
	}
	return sets.List(seen)
}

func unsupportedProjected(pv *v1.ProjectedVolumeSource, p *field.Path, add func(*field.Path)) {
	for i := range pv.Sources {
		sp := p.Child("sources").Index(i)
		s := &pv.Sources[i]
		walk(s, volumeProjectionChecks, sp, add)
		if d := s.DownwardAPI; d != nil {
			unsupportedDownwardAPIItems(d.Items, sp.Child("downwardAPI", "items"), add)
		}
	}
}

func unsupportedDownwardAPIItems(items []v1.DownwardAPIVolumeFile, p *field.Path, add func(*field.Path)) {
	for j := range items {
		ip := p.Index(j)
		walk(&items[j], downwardAPIFileChecks, ip, add)
		if fr := items[j].FieldRef; fr != nil && (!downwardAPIFieldPath(fr.FieldPath) ||
			(fr.APIVersion != "" && fr.APIVersion != "v1")) {
			add(ip.Child("fieldRef"))
		}
	}
}

func unsupportedContainer(c *v1.Container, p *field.Path, hostNetwork bool, add func(*field.Path)) {
	walk(c, containerChecks, p, add)
	walk(c.SecurityContext, securityContextChecks, p.Child("securityContext"), add)
	for i := range c.Ports {
		pp := p.Child("ports").Index(i)
		walk(&c.Ports[i], containerPortChecks, pp, add)
	}
	for i := range c.Env {
		vf := c.Env[i].ValueFrom
		if vf == nil {
			continue
		}
		vp := p.Child("env").Index(i).Child("valueFrom")
		walk(vf, envVarSourceChecks, vp, add)
		if vf.FieldRef != nil && (!supportedFieldPath(vf.FieldRef.FieldPath) ||
			(vf.FieldRef.APIVersion != "" && vf.FieldRef.APIVersion != "v1")) {
			add(vp.Child("fieldRef"))
		}
	}
	for i := range c.VolumeMounts {
		walk(&c.VolumeMounts[i], volumeMountChecks, p.Child("volumeMounts").Index(i), add)
	}
	rp := p.Child("resources")
	walk(&c.Resources, resourceRequirementsChecks, rp, add)
	for name := range c.Resources.Limits {
		if !limitResources.Has(name) && !kubetypes.IsExtendedResourceName(name) && !isHugePages(name) {
			add(rp.Child("limits").Key(string(name)))
		}
	}
	for name := range c.Resources.Requests {
		if !requestResources.Has(name) && !kubetypes.IsExtendedResourceName(name) && !isHugePages(name) {
			add(rp.Child("requests").Key(string(name)))
		}
	}
}

// maxListed is how many fields UnsupportedMessage names.
const maxListed = 10

// UnsupportedMessage is the pod status message for a pod refused for the
// fields in paths (from Unsupported): "Pod was rejected: nodeagent does not
// support: a, b, c", naming at most 10 fields and then "and N more".
func UnsupportedMessage(paths []string) string {
	listed := paths
	if len(paths) > maxListed {
		listed = paths[:maxListed]
	}
	msg := "Pod was rejected: nodeagent does not support: " + strings.Join(listed, ", ")
	if n := len(paths) - len(listed); n > 0 {
		msg += fmt.Sprintf(", and %d more", n)
	}
	return msg
}

// unsupportedUserNamespace names what the API server's validation refuses
// with or without a user namespace (a static pod is not validated by it):
// procMount Unmasked needs hostUsers: false ("`hostUsers` must be false to
// use `Unmasked`"); hostUsers: false forbids hostNetwork, hostPID and
// hostIPC. nodeagent also refuses shareProcessNamespace with it: the
// pod's pause, which holds the shared PID namespace, runs in the host's
// user namespace, where the containers could not mount their /proc.
func unsupportedUserNamespace(s *v1.PodSpec, spec *field.Path, add func(*field.Path)) {
	hostUsers := s.HostUsers == nil || *s.HostUsers
	if !hostUsers {
		if s.HostNetwork {
			add(spec.Child("hostNetwork"))
		}
		if s.HostPID {
			add(spec.Child("hostPID"))
		}
		if s.HostIPC {
			add(spec.Child("hostIPC"))
		}
		if s.ShareProcessNamespace != nil && *s.ShareProcessNamespace {
			add(spec.Child("shareProcessNamespace"))
		}
		return
	}
	check := func(cs []v1.Container, p *field.Path) {
		for i := range cs {
			if sc := cs[i].SecurityContext; sc != nil && sc.ProcMount != nil && *sc.ProcMount != v1.DefaultProcMount {
				add(p.Index(i).Child("securityContext", "procMount"))
			}
		}
	}
	check(s.InitContainers, spec.Child("initContainers"))
	check(s.Containers, spec.Child("containers"))
	for i := range s.EphemeralContainers {
		if sc := s.EphemeralContainers[i].SecurityContext; sc != nil && sc.ProcMount != nil && *sc.ProcMount != v1.DefaultProcMount {
			add(spec.Child("ephemeralContainers").Index(i).Child("securityContext", "procMount"))
		}
	}
}

// isHugePages reports whether name is a hugepages-<size> resource.
func isHugePages(name v1.ResourceName) bool {
	return strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

// isHugePagesMedium reports whether an emptyDir medium is HugePages or
// HugePages-<size> (mounted as hugetlbfs by package volume).
func isHugePagesMedium(m v1.StorageMedium) bool {
	return m == v1.StorageMediumHugePages || strings.HasPrefix(string(m), string(v1.StorageMediumHugePagesPrefix))
}
