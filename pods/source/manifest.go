package source

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/nodeagent/nodeagent/internal/yamldoc"
	"github.com/nodeagent/nodeagent/kubetypes"
)

// MaxManifestSize is the largest static pod manifest DecodeManifest reads
// (kubelet's limit too).
const MaxManifestSize = 10 << 20

// staticPodToleration is the toleration kubelet gives every static pod, so
// that its mirror pod is not evicted by the taint manager when the node
// becomes unreachable (the agent, not the control plane, runs it).
var staticPodToleration = v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}

// DecodeManifest turns the content of a static pod manifest file into the
// pod nodeagent runs, as kubelet's file source does. data is YAML or JSON
// holding exactly one object, apiVersion v1 and kind Pod; unknown or
// duplicate fields are errors naming the field. path is the file's path
// and nodeName this node's name.
//
// The pod is then completed: namespace "default" if unset; name
// "<name>-<nodeName>" (metadata.name is required; nodeName is lowercased);
// spec.nodeName = nodeName; SetDefaults; the NoExecute toleration kubelet
// adds to static pods; status reset to phase Pending; annotations
// kubernetes.io/config.source=file and kubernetes.io/config.hash=<UID>.
// The UID is 32 hex digits (as long as kubelet's) of a SHA-256 of the completed pod (without UID and hash),
// nodeName and path: the same file content at the same path on the same
// node gives the same UID across agent restarts, and any edit a new UID. A
// metadata.uid in the file is ignored. Finally the pod must pass
// ValidatePod and, as in kubelet, must not name a service account
// (spec.serviceAccountName); whether nodeagent supports it is left to
// admission (admission.Unsupported).
//
// A non-nil error is a *ManifestError for path whose Err joins every
// problem found, each naming its field path where there is one
// ("spec.containers[0].image: Required value").
func DecodeManifest(data []byte, path, nodeName string) (*v1.Pod, error) {
	pod, err := decodeManifest(data, path, nodeName)
	if err != nil {
		return nil, &ManifestError{Path: path, Err: err}
	}
	return pod, nil
}

func decodeManifest(data []byte, path, nodeName string) (*v1.Pod, error) {
	if nodeName == "" {
		return nil, errors.New("node name is empty")
	}
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("file is %d bytes, more than the %d a manifest may have", len(data), MaxManifestSize)
	}
	j, err := manifestJSON(data)
	if err != nil {
		return nil, err
	}

	var pod v1.Pod
	strictErrs, err := kjson.UnmarshalStrict(j, &pod, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("cannot decode a Pod: %w", err)
	}
	errs := strictErrs
	add := func(e *field.Error) { errs = append(errs, e) }
	if pod.APIVersion == "" {
		add(field.Required(field.NewPath("apiVersion"), `must be "v1"`))
	} else if pod.APIVersion != "v1" {
		add(field.NotSupported(field.NewPath("apiVersion"), pod.APIVersion, []string{"v1"}))
	}
	if pod.Kind == "" {
		add(field.Required(field.NewPath("kind"), `must be "Pod"`))
	} else if pod.Kind != "Pod" {
		add(field.NotSupported(field.NewPath("kind"), pod.Kind, []string{"Pod"}))
	}
	if pod.Name == "" {
		add(field.Required(field.NewPath("metadata", "name"), "a static pod needs a name"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	pod.Name = pod.Name + "-" + strings.ToLower(nodeName)
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.UID = ""
	pod.Spec.NodeName = nodeName
	SetDefaults(&pod)
	addToleration(&pod.Spec, staticPodToleration)
	pod.Status = v1.PodStatus{Phase: v1.PodPending}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	delete(pod.Annotations, kubetypes.AnnotationConfigHash)
	pod.Annotations[kubetypes.AnnotationConfigSource] = kubetypes.SourceFile

	uid, err := manifestUID(&pod, nodeName, path)
	if err != nil {
		return nil, err
	}
	pod.UID = uid
	pod.Annotations[kubetypes.AnnotationConfigHash] = string(uid)

	var invalid []error
	if err := ValidatePod(&pod); err != nil {
		invalid = append(invalid, err)
	}
	// Like kubelet (PreventStaticPodAPIReferences), refuse a static pod
	// that references an API object: its mirror pod would be refused by
	// NodeRestriction. Secrets, config maps and claims are unsupported
	// anyway (admission.Unsupported); a service account is not.
	for _, sa := range []struct{ field, name string }{
		{"serviceAccountName", pod.Spec.ServiceAccountName},
		{"serviceAccount", pod.Spec.DeprecatedServiceAccount},
	} {
		if sa.name != "" {
			invalid = append(invalid, field.Forbidden(field.NewPath("spec", sa.field), "a static pod may not reference a ServiceAccount"))
		}
	}
	// Projected service account tokens and config maps are API
	// references too (and the node may read them only for pods bound to
	// it through the API).
	for i, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for j, src := range v.Projected.Sources {
			p := field.NewPath("spec", "volumes").Index(i).Child("projected", "sources").Index(j)
			switch {
			case src.ServiceAccountToken != nil:
				invalid = append(invalid, field.Forbidden(p.Child("serviceAccountToken"), "a static pod may not reference a ServiceAccount"))
			case src.ConfigMap != nil:
				invalid = append(invalid, field.Forbidden(p.Child("configMap"), "a static pod may not reference a ConfigMap"))
			}
		}
	}
	invalid = append(invalid, envAPIRefs(&pod)...)
	if len(invalid) > 0 {
		return nil, errors.Join(invalid...)
	}
	return &pod, nil
}

// manifestJSON returns the single JSON object that data holds.
func manifestJSON(data []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		// JSON is YAML too, but the YAML parser is stricter about
		// whitespace (tabs) than JSON is: read JSON as JSON. If the first
		// value is not JSON, this is a YAML flow mapping.
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == nil {
			if _, err := dec.Token(); !errors.Is(err, io.EOF) {
				return nil, errors.New("found more than one JSON value; a static pod manifest holds exactly one Pod")
			}
			return raw, nil
		}
	}
	n, err := yamldoc.Count(data, 0)
	if err != nil {
		return nil, fmt.Errorf("YAML syntax error: %w", err)
	}
	switch {
	case n == 0:
		return nil, errors.New("file is empty; a static pod manifest holds one Pod")
	case n > 1:
		return nil, fmt.Errorf("found %d YAML documents; a static pod manifest holds exactly one Pod", n)
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("YAML error: %w", err)
	}
	if t := bytes.TrimSpace(j); len(t) == 0 || t[0] != '{' {
		return nil, errors.New("the top level must be a mapping with apiVersion: v1 and kind: Pod")
	}
	return j, nil
}

// manifestUID hashes the completed pod with the node and the file's path.
func manifestUID(pod *v1.Pod, nodeName, path string) (types.UID, error) {
	// encoding/json writes struct fields in declaration order and map keys
	// sorted: the same pod always gives the same bytes.
	b, err := json.Marshal(pod)
	if err != nil {
		return "", fmt.Errorf("hashing the pod: %w", err)
	}
	h := sha256.New()
	h.Write(b)
	fmt.Fprintf(h, "\x00host:%s\x00file:%s", nodeName, path)
	return types.UID(hex.EncodeToString(h.Sum(nil)[:16])), nil
}

// addToleration appends t to the spec's tolerations unless an equal one is
// there.
func addToleration(s *v1.PodSpec, t v1.Toleration) {
	for i := range s.Tolerations {
		if s.Tolerations[i].MatchToleration(&t) && s.Tolerations[i].TolerationSeconds == nil {
			return
		}
	}
	s.Tolerations = append(s.Tolerations, t)
}
