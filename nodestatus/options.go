package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	kubeletapis "k8s.io/kubelet/pkg/apis"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/evictionapi"
)

// Defaults, as in kubelet.
const (
	DefaultUpdateFrequency                  = 10 * time.Second
	DefaultReportFrequency                  = 5 * time.Minute
	DefaultMaxImages                  int32 = 50
	DefaultMaxPods                    int32 = 110
	DefaultEvictionPressureTransition       = 5 * time.Minute
	DefaultRuntimeCallTimeout               = 5 * time.Second
	DefaultRuntimeGracePeriod               = 30 * time.Second
	DefaultRequestTimeout                   = 10 * time.Second
	DefaultRootDir                          = "/var/lib/nodeagent"

	// MaxNamesPerImage is how many names of one image the status carries (as kubelet).
	MaxNamesPerImage = 5
	// StatusUpdateRetries is the number of tries per report (kubelet's nodeStatusUpdateRetry).
	StatusUpdateRetries = 5
)

// Image is one image held by the container runtime.
type Image struct {
	ID string
	// Names are the image's references (digests first, then tags, as kubelet).
	Names     []string
	SizeBytes int64
}

// Options configure a Manager. Zero values take the defaults documented per field.
type Options struct {
	NodeName string // required; the Node object's name
	// Hostname is reported as the Hostname address and the kubernetes.io/hostname
	// label. Default: NodeName (kubelet uses the hostname override, which is the node name).
	Hostname string
	Nodes    NodeClient   // required; with the node's own credentials
	Clock    clock.Clock  // default: the real clock
	Logger   *slog.Logger // default: slog.Default()

	UpdateFrequency time.Duration // compute period; default 10s
	ReportFrequency time.Duration // write when unchanged; default 5m

	MaxImages int32 // default 50; -1 = no limit
	MaxPods   int32 // default 110

	// Kubelet syntax: resource name -> quantity ("cpu": "100m", "memory": "1Gi").
	SystemReserved, KubeReserved map[string]string
	// Kubelet syntax: signal -> quantity or percentage ("memory.available": "100Mi",
	// "nodefs.available": "10%"). nil = kubelet's defaults
	// (eviction.DefaultHard), as config.Default sets them.
	EvictionHard                     map[string]string
	EvictionPressureTransitionPeriod time.Duration // default 5m
	// EvictionSoft are the soft thresholds (same syntax; nil = none): a
	// pressure condition is set as soon as one is met, whatever its grace
	// period (which only the eviction manager goes by).
	EvictionSoft map[string]string
	// EvictionMinimumReclaim is signal -> quantity or percentage of
	// capacity, published with the observation for the eviction manager.
	EvictionMinimumReclaim map[string]string

	NodeIP string // InternalIP; empty = the address of the default route's interface
	// RootDir is the agent's state directory; its filesystem is nodefs
	// (ephemeral-storage capacity, nodefs.* signals). Default /var/lib/nodeagent.
	RootDir string
	// ImageFSDir is the directory on the runtime's image filesystem (imagefs.*
	// signals), e.g. containerd's root. Empty = the same filesystem as RootDir.
	ImageFSDir string
	Labels     map[string]string // extra labels set at registration (kubelet's nodeLabels)
	Taints     []v1.Taint        // taints set at registration only (registerWithTaints)
	ProviderID string
	// NoRegister is kubelet's registerNode false: the agent never creates
	// its Node (nor sets Labels, Taints, ProviderID or the attach-detach
	// annotation on it); Register waits, retrying, until someone else
	// has created it, and a Node deleted later is not created again.
	NoRegister bool

	AgentVersion string // nodeagent's version, reported in nodeInfo.kubeletVersion (KubeletVersion)
	// KubeletPort is the node API's port, reported as
	// status.daemonEndpoints.kubeletEndpoint.Port (the API server connects
	// there for logs, exec, ...); 0 reports none.
	KubeletPort int32

	// RuntimeVersion returns the runtime's name and version ("containerd",
	// "1.7.2"); reported as containerRuntimeVersion "name://version".
	// nil = no runtime configured: the field stays empty and is not a Ready condition.
	RuntimeVersion func(ctx context.Context) (name, version string, err error)
	// ListImages returns the images held by the runtime, in any order. nil = no images.
	ListImages func(ctx context.Context) ([]Image, error)
	// DevicePlugins returns the device plugins' resources (kubelet's
	// GetDevicePluginResourceCapacity): capacity, allocatable, and
	// resources dropped since the last call (reported with capacity 0).
	// nil = no device plugins.
	DevicePlugins func() (capacity, allocatable v1.ResourceList, removed []string)
	// RuntimeHealthy and PLEGHealthy return nil while healthy; nil funcs are not wired.
	// The error text goes into the Ready condition's message.
	RuntimeHealthy, PLEGHealthy func() error
	// NetworkReady returns nil while the pod network is ready (a CNI
	// configuration is usable); nil = not wired (no pod networking). It
	// must not block. Its error text is the whole cause, as kubelet words
	// it ("container runtime network not ready: NetworkReady=false
	// reason:NetworkPluginNotReady message:..."), and is reported at once,
	// without the runtime grace period.
	NetworkReady func() error
	// VolumesInUse lists the attachable volumes the node's pods want or
	// still have mounted (csi.Mounter.VolumesInUse), reported as
	// status.volumesInUse; nil = not wired (the field is left alone).
	VolumesInUse func() []v1.UniqueVolumeName
	// RuntimeHandlers are the runtime's handlers and their features,
	// reported as status.runtimeHandlers; it must not block; nil = not
	// wired.
	RuntimeHandlers func() []v1.NodeRuntimeHandler
	// VolumesReportedInUse is told, after every status computation, the
	// volumes the Node's status.volumesInUse holds: after a successful
	// write the written Node's list, when nothing needed writing the
	// Node's own (kubelet's markVolumesFromNode into
	// MarkVolumesAsReportedInUse; csi.Mounter.MarkVolumesReportedInUse),
	// so that the mount of an attachable volume waits until the attach/detach
	// controller can see it in use. Not after Register (nor does kubelet).
	// It is called with the Manager's lock held and must not block. nil =
	// not wired.
	VolumesReportedInUse func([]v1.UniqueVolumeName)
	// VolumesInUseSynced reports whether VolumesInUse is complete (the
	// agent's volume reconstruction has run, csi.Mounter.Synced); until
	// then status.volumesInUse keeps its value. nil = always.
	VolumesInUseSynced func() bool
	// ShuttingDown returns nil unless the node is shutting down (graceful
	// node shutdown); its error text ("node is shutting down") is a cause
	// of Ready False, as kubelet's shutdown manager errors. nil = not wired.
	ShuttingDown func() error
	// CSINodeReady returns nil once the node's CSINode is initialized
	// (created, with the migrated-plugins annotation); until then its
	// error ("CSINode is not yet initialized", "failed to initialize
	// CSINode: ...") is a cause of Ready False, as kubelet's CSI plugin
	// sets it with SetKubeletError. It must not block. nil = not wired.
	CSINodeReady func() error

	// RuntimeCallTimeout bounds every call above. Default 5s.
	RuntimeCallTimeout time.Duration
	// RuntimeGracePeriod is how long the last good runtime answer is trusted after
	// calls start failing (or hanging) before the failure turns Ready False.
	// Default 30s. It does not apply before the first success.
	RuntimeGracePeriod time.Duration

	// RequestTimeout bounds each API request (a try), so a dead connection
	// cannot stall the loop. Default 10s.
	RequestTimeout time.Duration

	// Host reads the host's facts; nil = the real host (root "/").
	Host *Host
	// Rand returns a float64 in [0,1) for report jitter; default math/rand/v2.
	Rand func() float64
}

// config is the validated, defaulted form of Options.
type config struct {
	Options
	reserved   v1.ResourceList // systemReserved + kubeReserved
	thresholds []threshold     // hard
	soft       []threshold
	minReclaim map[string]threshold
}

// pressureThresholds are the thresholds that set pressure conditions:
// hard and soft, as kubelet's nodeConditions(thresholdsMet(...)).
func (c *config) pressureThresholds() []threshold {
	return append(append([]threshold{}, c.thresholds...), c.soft...)
}

func (o Options) validate() (*config, error) {
	var errs []error
	c := &config{Options: o}
	if o.NodeName == "" {
		errs = append(errs, errors.New("nodeName: required"))
	} else if msgs := validation.IsDNS1123Subdomain(o.NodeName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("nodeName %q: %s", o.NodeName, strings.Join(msgs, "; ")))
	}
	if c.Hostname == "" {
		c.Hostname = o.NodeName
	}
	if msgs := validation.IsValidLabelValue(c.Hostname); len(msgs) > 0 && c.Hostname != "" {
		errs = append(errs, fmt.Errorf("hostname %q: %s", c.Hostname, strings.Join(msgs, "; ")))
	}
	if o.Nodes == nil {
		errs = append(errs, errors.New("nodes: required"))
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"nodeStatusUpdateFrequency", &c.UpdateFrequency, DefaultUpdateFrequency},
		{"nodeStatusReportFrequency", &c.ReportFrequency, DefaultReportFrequency},
		{"evictionPressureTransitionPeriod", &c.EvictionPressureTransitionPeriod, DefaultEvictionPressureTransition},
		{"runtimeCallTimeout", &c.RuntimeCallTimeout, DefaultRuntimeCallTimeout},
		{"runtimeGracePeriod", &c.RuntimeGracePeriod, DefaultRuntimeGracePeriod},
		{"requestTimeout", &c.RequestTimeout, DefaultRequestTimeout},
	}
	for _, d := range durations {
		switch {
		case *d.v == 0:
			*d.v = d.def
		case *d.v < 0:
			errs = append(errs, fmt.Errorf("%s: must be positive, got %v", d.name, *d.v))
		}
	}
	if c.MaxImages == 0 {
		c.MaxImages = DefaultMaxImages
	} else if c.MaxImages < -1 {
		errs = append(errs, fmt.Errorf("nodeStatusMaxImages: must be >= -1, got %d", c.MaxImages))
	}
	if c.MaxPods == 0 {
		c.MaxPods = DefaultMaxPods
	} else if c.MaxPods < 0 {
		errs = append(errs, fmt.Errorf("maxPods: must be positive, got %d", c.MaxPods))
	}
	if c.RootDir == "" {
		c.RootDir = DefaultRootDir
	}
	if c.ImageFSDir == "" {
		c.ImageFSDir = c.RootDir
	}
	if o.NodeIP != "" {
		if err := validateNodeIP(o.NodeIP); err != nil {
			errs = append(errs, fmt.Errorf("nodeIP: %w", err))
		}
	}
	var err error
	c.reserved = v1.ResourceList{}
	for _, r := range []struct {
		name string
		m    map[string]string
	}{{"systemReserved", o.SystemReserved}, {"kubeReserved", o.KubeReserved}} {
		for _, k := range slices.Sorted(maps.Keys(r.m)) {
			q, err := resource.ParseQuantity(r.m[k])
			if err != nil {
				errs = append(errs, fmt.Errorf("%s[%s]: %q: %w", r.name, k, r.m[k], err))
				continue
			}
			if q.Sign() < 0 {
				errs = append(errs, fmt.Errorf("%s[%s]: must not be negative, got %s", r.name, k, r.m[k]))
				continue
			}
			sum := c.reserved[v1.ResourceName(k)]
			sum.Add(q)
			c.reserved[v1.ResourceName(k)] = sum
		}
	}
	hard := o.EvictionHard
	if hard == nil {
		hard = evictionapi.DefaultHard()
	}
	if c.thresholds, err = parseThresholds(hard); err != nil {
		errs = append(errs, fmt.Errorf("evictionHard: %w", err))
	}
	if c.soft, err = parseThresholds(o.EvictionSoft); err != nil {
		errs = append(errs, fmt.Errorf("evictionSoft: %w", err))
	}
	for i := range c.soft {
		c.soft[i].soft = true
	}
	if c.minReclaim, err = parseMinReclaims(o.EvictionMinimumReclaim); err != nil {
		errs = append(errs, fmt.Errorf("evictionMinimumReclaim: %w", err))
	}
	for _, k := range slices.Sorted(maps.Keys(o.Labels)) {
		if err := validateNodeLabel(k, o.Labels[k]); err != nil {
			errs = append(errs, fmt.Errorf("nodeLabels: %w", err))
		}
	}
	for i, t := range o.Taints {
		if err := validateTaint(t); err != nil {
			errs = append(errs, fmt.Errorf("registerWithTaints[%d]: %w", i, err))
		}
	}
	if c.Host == nil {
		c.Host = &Host{}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("invalid nodestatus options: %w", err)
	}
	return c, nil
}

func validateNodeIP(s string) error {
	ip := net.ParseIP(s)
	switch {
	case ip == nil:
		return fmt.Errorf("%q is not an IP address", s)
	case ip.IsLoopback():
		return fmt.Errorf("%q is a loopback address", s)
	case ip.IsMulticast():
		return fmt.Errorf("%q is a multicast address", s)
	case ip.IsLinkLocalUnicast():
		return fmt.Errorf("%q is a link-local address", s)
	case ip.IsUnspecified():
		return fmt.Errorf("%q is the unspecified address; leave nodeIP empty to use the default route's interface", s)
	}
	return nil
}

// validateNodeLabel rejects labels that are malformed or that NodeRestriction
// admission forbids a node to set on its own Node object.
func validateNodeLabel(k, v string) error {
	if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
		return fmt.Errorf("label key %q: %s", k, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
		return fmt.Errorf("label %q value %q: %s", k, v, strings.Join(msgs, "; "))
	}
	ns := ""
	if i := strings.Index(k, "/"); i >= 0 {
		ns = k[:i]
	}
	if ns == v1.LabelNamespaceNodeRestriction || strings.HasSuffix(ns, "."+v1.LabelNamespaceNodeRestriction) {
		return fmt.Errorf("label %q: the %s prefix is reserved for cluster administrators; NodeRestriction forbids a node to set it", k, v1.LabelNamespaceNodeRestriction)
	}
	isKube := ns == "kubernetes.io" || strings.HasSuffix(ns, ".kubernetes.io") || ns == "k8s.io" || strings.HasSuffix(ns, ".k8s.io")
	if isKube && !kubeletapis.IsKubeletLabel(k) {
		return fmt.Errorf("label %q: NodeRestriction forbids a node to set kubernetes.io/k8s.io labels other than %s and the *.%s/, *.%s/ prefixes",
			k, strings.Join(kubeletapis.KubeletLabels(), ", "), v1.LabelNamespaceSuffixKubelet, v1.LabelNamespaceSuffixNode)
	}
	return nil
}

func validateTaint(t v1.Taint) error {
	if msgs := validation.IsQualifiedName(t.Key); len(msgs) > 0 {
		return fmt.Errorf("taint key %q: %s", t.Key, strings.Join(msgs, "; "))
	}
	if t.Value != "" {
		if msgs := validation.IsValidLabelValue(t.Value); len(msgs) > 0 {
			return fmt.Errorf("taint %q value %q: %s", t.Key, t.Value, strings.Join(msgs, "; "))
		}
	}
	switch t.Effect {
	case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
	default:
		return fmt.Errorf("taint %q: effect %q is not one of NoSchedule, PreferNoSchedule, NoExecute", t.Key, t.Effect)
	}
	return nil
}
