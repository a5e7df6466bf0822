package volume

// The volume types whose files the agent writes (kubelet's "payload"
// volumes): secret, configMap, downwardAPI and projected. Each lives at
// <podDir>/volumes/<plugin>/<name> on a tmpfs of its own and is written with
// writeAtomic, so that an update (a changed Secret or ConfigMap, new pod
// labels) is swapped in whole.

import (
	"context"
	"errors"
	"fmt"
	"math"
	goruntime "runtime"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/kubetypes"
)

// Directories of the payload volume types under <podDir>/volumes.
const (
	secretPlugin      = "secret"
	configMapPlugin   = "configmap"
	downwardAPIPlugin = "downward-api"
)

// ObjectGetter reads the API objects of one kind that a pod references;
// *objcache.Cache implements it. A missing object is an apierrors.NotFound
// error.
type ObjectGetter[T any] interface {
	Get(ctx context.Context, uid types.UID, namespace, name string) (T, error)
	Release(uid types.UID)
}

// SecretGetter reads the Secrets a pod references.
type SecretGetter = ObjectGetter[*v1.Secret]

// ConfigMapGetter reads the ConfigMaps a pod references.
type ConfigMapGetter = ObjectGetter[*v1.ConfigMap]

// MountError is the failure to set up one volume. Its message is kubelet's
// FailedMount event message: `MountVolume.SetUp failed for volume "x" :
// secret "y" not found`.
type MountError struct {
	Volume string
	// Op is kubelet's operation that failed ("": MountVolume.SetUp; also
	// MountVolume.WaitForAttach, MountVolume.MountDevice).
	Op  string
	Err error
	// Reason is the Event's reason ("": kubelet's FailedMount; the raw
	// block map operations' is FailedMapVolume).
	Reason string
	// Prefix replaces "<Op> failed" for kubelet's messages worded
	// otherwise ("MapVolume.MarkVolumeAsMounted failed while expanding
	// volume").
	Prefix string
}

// EventReason is the reason of the Event that reports e.
func (e *MountError) EventReason() string {
	if e.Reason == "" {
		return "FailedMount"
	}
	return e.Reason
}

func (e *MountError) Error() string {
	prefix := e.Prefix
	if prefix == "" {
		op := e.Op
		if op == "" {
			op = "MountVolume.SetUp"
		}
		prefix = op + " failed"
	}
	return fmt.Sprintf("%s for volume %q : %v", prefix, e.Volume, e.Err)
}

func (e *MountError) Unwrap() error { return e.Err }

// MountErrors returns the MountErrors in err (a join of them, as Setup
// returns), in order.
func MountErrors(err error) []*MountError {
	var out []*MountError
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if me, ok := err.(*MountError); ok {
			out = append(out, me)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// isPayloadVolume reports whether the Projector writes v.
func isPayloadVolume(v *v1.Volume) bool {
	return v.Secret != nil || v.ConfigMap != nil || v.DownwardAPI != nil || v.Projected != nil
}

func hasPayloadVolumes(pod *v1.Pod) bool {
	for i := range pod.Spec.Volumes {
		if isPayloadVolume(&pod.Spec.Volumes[i]) {
			return true
		}
	}
	return false
}

// pluginOf is the directory of v's type under <podDir>/volumes.
func pluginOf(v *v1.Volume) string {
	switch {
	case v.Secret != nil:
		return secretPlugin
	case v.ConfigMap != nil:
		return configMapPlugin
	case v.DownwardAPI != nil:
		return downwardAPIPlugin
	}
	return projectedPlugin
}

func modeOr(m *int32, def int32) int32 {
	if m != nil {
		return *m
	}
	return def
}

// errStaticPod: static pods have no node binding, so the Node authorizer
// lets the node read none of their Secrets or ConfigMaps (and the API
// server would refuse their mirror pods).
func errStaticPod(kind, name string) error {
	return fmt.Errorf("%s %q: static pods cannot reference API objects", kind, name)
}

// secretFiles returns the files of a Secret: every key, or the items' keys
// at their paths. A missing Secret is an empty volume when optional, else
// the API's NotFound error (`secret "x" not found`); a missing item key is
// skipped when optional, else an error.
func (p *Projector) secretFiles(ctx context.Context, pod *v1.Pod, name string, items []v1.KeyToPath, optional bool, defaultMode int32) ([]projectedFile, error) {
	s, err := getObject(ctx, p.secrets, pod, "Secret", "secret", name, optional)
	if err != nil || s == nil {
		return nil, err
	}
	return keyFiles(s.Data, items, optional, defaultMode, "references non-existent secret key")
}

// configMapFiles returns the files of a ConfigMap: every key of data and
// binaryData, or the items' keys at their paths, with secretFiles' rules
// for missing objects and keys.
func (p *Projector) configMapFiles(ctx context.Context, pod *v1.Pod, name string, items []v1.KeyToPath, optional bool, defaultMode int32) ([]projectedFile, error) {
	cm, err := getObject(ctx, p.configMaps, pod, "ConfigMap", "configmap", name, optional)
	if err != nil || cm == nil {
		return nil, err
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	for k, v := range cm.Data {
		data[k] = []byte(v) // the API server keeps the two key sets apart
	}
	return keyFiles(data, items, optional, defaultMode, "configmap references non-existent config key")
}

// getObject reads a pod's named object through g: the zero T (and no
// error) when it is missing and optional. Static pods may reference none.
func getObject[T any](ctx context.Context, g ObjectGetter[T], pod *v1.Pod, kind, resource, name string, optional bool) (T, error) {
	var zero T
	switch {
	case name == "":
		return zero, fmt.Errorf("no %s name", kind)
	case kubetypes.IsStaticPod(pod):
		return zero, errStaticPod(resource, name)
	case g == nil:
		return zero, fmt.Errorf("%s %q: no API server to read it from", resource, name)
	}
	obj, err := g.Get(ctx, pod.UID, pod.Namespace, name)
	switch {
	case apierrors.IsNotFound(err) && optional:
		return zero, nil
	case err != nil:
		return zero, err
	}
	return obj, nil
}

// keyFiles lays out an object's keys as files: every key sorted by name, or
// the items' keys at their paths; a missing item key is skipped when
// optional, else an error starting with missing.
func keyFiles(data map[string][]byte, items []v1.KeyToPath, optional bool, defaultMode int32, missing string) ([]projectedFile, error) {
	if len(items) == 0 {
		files := make([]projectedFile, 0, len(data))
		for k, v := range data {
			files = append(files, projectedFile{path: k, data: v, mode: defaultMode})
		}
		sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
		return files, nil
	}
	var files []projectedFile
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("%s: %s", missing, it.Key)
		}
		files = append(files, projectedFile{path: it.Path, data: v, mode: modeOr(it.Mode, defaultMode)})
	}
	return files, nil
}

// downwardAPIFiles returns the files of downwardAPI items.
func (p *Projector) downwardAPIFiles(pod *v1.Pod, items []v1.DownwardAPIVolumeFile, defaultMode int32) ([]projectedFile, error) {
	var (
		files []projectedFile
		errs  []error
	)
	for i, it := range items {
		var (
			v   string
			err error
		)
		if it.ResourceFieldRef != nil {
			v, err = p.resourceValue(pod, it.ResourceFieldRef)
		} else {
			v, err = downwardAPIValue(pod, it)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("items[%d] (%s): %w", i, it.Path, err))
			continue
		}
		files = append(files, projectedFile{path: it.Path, data: []byte(v), mode: modeOr(it.Mode, defaultMode)})
	}
	return files, errors.Join(errs...)
}

// resourceValue is a resourceFieldRef's value, as kubelet computes it: the
// container's limit or request in units of divisor (default 1), rounded
// up; an unset limit is the pod-level limit, else the node's allocatable.
func (p *Projector) resourceValue(pod *v1.Pod, ref *v1.ResourceFieldSelector) (string, error) {
	c := findContainer(pod, ref.ContainerName)
	if c == nil {
		return "", fmt.Errorf("resourceFieldRef: container %q not found", ref.ContainerName)
	}
	return ResourceFieldValue(c, ref, kubetypes.DownwardAPIAllocatable(pod, p.allocatable()))
}

func findContainer(pod *v1.Pod, name string) *v1.Container {
	for _, cs := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	return nil
}

// allocatable is the node's allocatable resources (from the Node object,
// or the machine's capacity when there is none).
func (p *Projector) allocatable() v1.ResourceList {
	if p.node != nil {
		if n := p.node(); n != nil && len(n.Status.Allocatable) > 0 {
			return n.Status.Allocatable
		}
	}
	out := v1.ResourceList{v1.ResourceCPU: *resource.NewQuantity(int64(goruntime.NumCPU()), resource.DecimalSI)}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		out[v1.ResourceMemory] = *resource.NewQuantity(int64(si.Totalram)*int64(si.Unit), resource.BinarySI)
	}
	return out
}

// ResourceFieldValue is the value of a downward API resourceFieldRef for
// container c (the Downward API's rule, shared by volumes and env):
// limits.cpu, limits.memory, limits.ephemeral-storage, limits.hugepages-*,
// and the same for requests, divided by ref.Divisor (1 when zero) and
// rounded up; cpu is compared in millicores. A limit the container does
// not set is allocatable's value for that resource (the node's
// allocatable: kubelet's default).
func ResourceFieldValue(c *v1.Container, ref *v1.ResourceFieldSelector, allocatable v1.ResourceList) (string, error) {
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("resourceFieldRef: unsupported resource %q", ref.Resource)
	}
	rn := v1.ResourceName(name)
	switch {
	case rn == v1.ResourceCPU, rn == v1.ResourceMemory, rn == v1.ResourceEphemeralStorage:
	case strings.HasPrefix(name, v1.ResourceHugePagesPrefix):
	default:
		return "", fmt.Errorf("resourceFieldRef: unsupported resource %q", ref.Resource)
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	var q resource.Quantity
	if kind == "limits" {
		v, ok := c.Resources.Limits[rn]
		if !ok || v.IsZero() {
			v = allocatable[rn]
		}
		q = v
	} else {
		q = c.Resources.Requests[rn]
	}
	if rn == v1.ResourceCPU {
		if divisor.MilliValue() <= 0 {
			return "", fmt.Errorf("resourceFieldRef: invalid divisor %s", divisor.String())
		}
		return fmt.Sprint(int64(math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue())))), nil
	}
	if divisor.Value() <= 0 {
		return "", fmt.Errorf("resourceFieldRef: invalid divisor %s", divisor.String())
	}
	return fmt.Sprint(int64(math.Ceil(float64(q.Value()) / float64(divisor.Value())))), nil
}
