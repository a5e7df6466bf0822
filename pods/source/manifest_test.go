package source

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilptr "k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pods/admission"
)

const minimalManifest = `apiVersion: v1
kind: Pod
metadata:
  name: hello
spec:
  containers:
  - name: c
    image: busybox:1.36
`

func TestManifestDecodeRealistic(t *testing.T) {
	path := filepath.Join("testdata", "manifests", "web.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := DecodeManifest(data, path, "Node-1")
	if err != nil {
		t.Fatalf("DecodeManifest: %v", err)
	}
	if pod.Name != "web-node-1" || pod.Namespace != "kube-system" {
		t.Errorf("name = %s/%s, want kube-system/web-node-1", pod.Namespace, pod.Name)
	}
	if pod.Spec.NodeName != "Node-1" {
		t.Errorf("spec.nodeName = %q, want Node-1", pod.Spec.NodeName)
	}
	if len(pod.UID) != 32 {
		t.Errorf("UID %q: want 32 hex digits", pod.UID)
	}
	wantAnn := map[string]string{kubetypes.AnnotationConfigSource: kubetypes.SourceFile, kubetypes.AnnotationConfigHash: string(pod.UID)}
	if d := cmp.Diff(wantAnn, pod.Annotations); d != "" {
		t.Errorf("annotations (-want +got):\n%s", d)
	}
	if pod.Labels["app"] != "web" {
		t.Errorf("labels = %v", pod.Labels)
	}
	if d := cmp.Diff([]v1.Toleration{staticPodToleration}, pod.Spec.Tolerations); d != "" {
		t.Errorf("tolerations (-want +got):\n%s", d)
	}
	if pod.Status.Phase != v1.PodPending {
		t.Errorf("phase = %q, want Pending", pod.Status.Phase)
	}
	// Defaults applied.
	c := pod.Spec.Containers[0]
	if c.ImagePullPolicy != v1.PullIfNotPresent || c.TerminationMessagePath != v1.TerminationMessagePathDefault {
		t.Errorf("container defaults not applied: %+v", c)
	}
	if got := c.Resources.Requests[v1.ResourceMemory]; got.Cmp(resource.MustParse("64Mi")) != 0 {
		t.Errorf("memory request = %s, want the limit 64Mi", got.String())
	}
	if c.Ports[0].Protocol != v1.ProtocolTCP || c.Ports[0].HostPort != 8080 {
		t.Errorf("port = %+v, want TCP with hostPort 8080 (hostNetwork)", c.Ports[0])
	}
	if c.Env[0].ValueFrom.FieldRef.APIVersion != "v1" {
		t.Errorf("fieldRef apiVersion not defaulted")
	}
	if *pod.Spec.Volumes[1].HostPath.Type != v1.HostPathDirectory {
		t.Errorf("hostPath type overwritten: %v", *pod.Spec.Volumes[1].HostPath.Type)
	}
	if len(pod.Spec.InitContainers) != 1 {
		t.Errorf("init containers lost")
	}
	// The realistic manifest is within what nodeagent supports.
	if u := admission.Unsupported(pod); u != nil {
		t.Errorf("admission.Unsupported = %v, want none", u)
	}

	// Roundtrip: the decoded pod, written as YAML and decoded again as a
	// manifest, keeps its spec (defaulting is idempotent).
	out, err := yaml.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	var back v1.Pod
	if err := yaml.UnmarshalStrict(out, &back); err != nil {
		t.Fatalf("roundtrip: %v", err)
	}
	if d := cmp.Diff(pod.Spec, back.Spec); d != "" {
		t.Errorf("roundtrip spec (-want +got):\n%s", d)
	}
	again := back.DeepCopy()
	SetDefaults(again)
	if d := cmp.Diff(back.Spec, again.Spec); d != "" {
		t.Errorf("SetDefaults on a defaulted pod changed it (-before +after):\n%s", d)
	}
}

func TestManifestDecodeJSON(t *testing.T) {
	path := filepath.Join("testdata", "manifests", "web.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := DecodeManifest(data, path, "n1")
	if err != nil {
		t.Fatalf("DecodeManifest: %v", err)
	}
	if pod.Name != "web-json-n1" || pod.Namespace != "default" {
		t.Errorf("name = %s/%s, want default/web-json-n1", pod.Namespace, pod.Name)
	}
	if pod.Spec.Containers[0].ImagePullPolicy != v1.PullAlways {
		t.Errorf("imagePullPolicy = %q, want Always for an untagged image", pod.Spec.Containers[0].ImagePullPolicy)
	}
}

func TestManifestUIDStability(t *testing.T) {
	base, err := DecodeManifest([]byte(minimalManifest), "/etc/pods/a.yaml", "n1")
	if err != nil {
		t.Fatal(err)
	}
	uid := func(data, path, node string) string {
		t.Helper()
		p, err := DecodeManifest([]byte(data), path, node)
		if err != nil {
			t.Fatalf("DecodeManifest: %v", err)
		}
		return string(p.UID)
	}
	tests := []struct {
		desc, data, path, node string
		same                   bool
	}{
		{"same bytes", minimalManifest, "/etc/pods/a.yaml", "n1", true},
		{"same content, other formatting and comments", "# hi\n" + strings.ReplaceAll(minimalManifest, "  name: hello", "  name: \"hello\""), "/etc/pods/a.yaml", "n1", true},
		{"explicit defaults", minimalManifest + "  restartPolicy: Always\n", "/etc/pods/a.yaml", "n1", true},
		{"uid in the file is ignored", strings.Replace(minimalManifest, "  name: hello\n", "  name: hello\n  uid: abc\n", 1), "/etc/pods/a.yaml", "n1", true},
		{"edited image", strings.Replace(minimalManifest, "1.36", "1.37", 1), "/etc/pods/a.yaml", "n1", false},
		{"edited label", strings.Replace(minimalManifest, "  name: hello\n", "  name: hello\n  labels: {a: b}\n", 1), "/etc/pods/a.yaml", "n1", false},
		{"other path", minimalManifest, "/etc/pods/b.yaml", "n1", false},
		{"other node", minimalManifest, "/etc/pods/a.yaml", "n2", false},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got := uid(tt.data, tt.path, tt.node)
			if (got == string(base.UID)) != tt.same {
				t.Errorf("UID %s vs base %s: same = %v, want %v", got, base.UID, !tt.same, tt.same)
			}
		})
	}
}

func TestManifestDecodeErrors(t *testing.T) {
	tests := []struct {
		desc string
		data string
		node string
		want []string // substrings of the error
	}{
		{"empty file", "", "n1", []string{"file is empty"}},
		{"only comments", "# nothing\n---\n", "n1", []string{"file is empty"}},
		{"two documents", minimalManifest + "---\n" + minimalManifest, "n1", []string{"found 2 YAML documents"}},
		{"two JSON values", `{"apiVersion":"v1","kind":"Pod"} {"apiVersion":"v1","kind":"Pod"}`, "n1", []string{"more than one JSON value"}},
		{"YAML syntax", "apiVersion: v1\nkind: [Pod\n", "n1", []string{"YAML syntax error"}},
		{"not a mapping", "- a\n- b\n", "n1", []string{"top level must be a mapping"}},
		{"unknown field named", strings.Replace(minimalManifest, "    image:", "    imagee: x\n    image:", 1), "n1",
			[]string{`unknown field "spec.containers[0].imagee"`}},
		{"two unknown fields at once", minimalManifest + "  foo: 1\nbar: 2\n", "n1",
			[]string{`unknown field "spec.foo"`, `unknown field "bar"`}},
		{"duplicate field", minimalManifest + "  restartPolicy: Never\n  restartPolicy: Always\n", "n1", []string{"restartPolicy"}},
		{"wrong type", strings.Replace(minimalManifest, "name: hello", "name: [hello]", 1), "n1", []string{"cannot decode a Pod"}},
		{"apiVersion", strings.Replace(minimalManifest, "apiVersion: v1", "apiVersion: apps/v1", 1), "n1",
			[]string{`apiVersion: Unsupported value: "apps/v1": supported values: "v1"`}},
		{"missing apiVersion and kind", strings.Replace(strings.Replace(minimalManifest, "apiVersion: v1\n", "", 1), "kind: Pod\n", "", 1), "n1",
			[]string{"apiVersion: Required value", "kind: Required value"}},
		{"kind", strings.Replace(minimalManifest, "kind: Pod", "kind: Deployment", 1), "n1",
			[]string{`kind: Unsupported value: "Deployment"`}},
		{"no name", strings.Replace(minimalManifest, "  name: hello\n", "  namespace: x\n", 1), "n1",
			[]string{"metadata.name: Required value"}},
		{"invalid pod, every problem", `apiVersion: v1
kind: Pod
metadata: {name: Hello_World}
spec:
  restartPolicy: Sometimes
  containers:
  - name: c
  - name: c
    image: busybox
`, "n1", []string{"metadata.name: Invalid value", "spec.containers[0].image: Required value",
			`spec.containers[1].name: Duplicate value: "c"`, `spec.restartPolicy: Unsupported value: "Sometimes"`}},
		{"service account", minimalManifest + "  serviceAccountName: default\n  serviceAccount: default\n", "n1",
			[]string{"spec.serviceAccountName: Forbidden: a static pod may not reference a ServiceAccount",
				"spec.serviceAccount: Forbidden"}},
		{"projected API references", minimalManifest + `  volumes:
  - name: p
    projected:
      sources:
      - serviceAccountToken: {path: token}
      - configMap: {name: cm}
      - downwardAPI: {items: [{path: ns, fieldRef: {fieldPath: metadata.namespace}}]}
`, "n1", []string{"spec.volumes[0].projected.sources[0].serviceAccountToken: Forbidden",
			"spec.volumes[0].projected.sources[1].configMap: Forbidden"}},
		{"env API references", minimalManifest + `    envFrom:
    - configMapRef: {name: cm}
    - secretRef: {name: s}
    env:
    - name: A
      valueFrom: {configMapKeyRef: {name: cm, key: k}}
    - name: B
      valueFrom: {secretKeyRef: {name: s, key: k}}
`, "n1", []string{"spec.containers[0].envFrom[0].configMapRef: Forbidden: a static pod may not reference a ConfigMap",
			"spec.containers[0].envFrom[1].secretRef: Forbidden: a static pod may not reference a Secret",
			"spec.containers[0].env[0].valueFrom.configMapKeyRef: Forbidden", "spec.containers[0].env[1].valueFrom.secretKeyRef: Forbidden"}},
		{"mount propagation", `apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  volumes: [{name: h, hostPath: {path: /mnt}}]
  containers:
  - name: c
    image: busybox
    volumeMounts:
    - {name: h, mountPath: /a, mountPropagation: Bidirectional}
    - {name: h, mountPath: /b, mountPropagation: HostToContainer}
    - {name: h, mountPath: /c, mountPropagation: None}
    - {name: h, mountPath: /d, mountPropagation: Sideways}
  - name: d
    image: busybox
    securityContext: {privileged: false}
    volumeMounts: [{name: h, mountPath: /a, mountPropagation: Bidirectional}]
`, "n1", []string{"spec.containers[0].volumeMounts[0].mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers",
			`spec.containers[0].volumeMounts[3].mountPropagation: Unsupported value: "Sideways": supported values: "Bidirectional", "HostToContainer", "None"`,
			"spec.containers[1].volumeMounts[0].mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers"}},
		{"no node name", minimalManifest, "", []string{"node name is empty"}},
		{"too large", minimalManifest + "# " + strings.Repeat("x", MaxManifestSize) + "\n", "n1", []string{"more than the"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			pod, err := DecodeManifest([]byte(tt.data), "/etc/pods/x.yaml", tt.node)
			if err == nil {
				t.Fatalf("DecodeManifest = %v, want an error", pod.Name)
			}
			if pod != nil {
				t.Errorf("pod returned with an error")
			}
			var me *ManifestError
			if !errors.As(err, &me) || me.Path != "/etc/pods/x.yaml" {
				t.Errorf("error %T is not a *ManifestError for the path", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestManifestKeepsExistingToleration(t *testing.T) {
	data := minimalManifest + "  tolerations:\n  - operator: Exists\n    effect: NoExecute\n"
	pod, err := DecodeManifest([]byte(data), "/p.yaml", "n1")
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.Tolerations) != 1 {
		t.Errorf("tolerations = %v, want the file's one only", pod.Spec.Tolerations)
	}
	data = minimalManifest + "  tolerations:\n  - operator: Exists\n    effect: NoExecute\n    tolerationSeconds: 5\n"
	pod, err = DecodeManifest([]byte(data), "/p.yaml", "n1")
	if err != nil {
		t.Fatal(err)
	}
	want := []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: utilptr.To[int64](5)}, staticPodToleration}
	if d := cmp.Diff(want, pod.Spec.Tolerations); d != "" {
		t.Errorf("tolerations (-want +got):\n%s", d)
	}
}

// A privileged container may use Bidirectional; HostToContainer and None
// need nothing.
func TestManifestMountPropagationAccepted(t *testing.T) {
	pod, err := DecodeManifest([]byte(`apiVersion: v1
kind: Pod
metadata: {name: csi}
spec:
  volumes: [{name: h, hostPath: {path: /var/lib/kubelet/plugins}}]
  containers:
  - name: plugin
    image: busybox
    securityContext: {privileged: true}
    volumeMounts: [{name: h, mountPath: /a, mountPropagation: Bidirectional}]
  - name: watcher
    image: busybox
    volumeMounts: [{name: h, mountPath: /b, mountPropagation: HostToContainer}, {name: h, mountPath: /c, mountPropagation: None}]
`), "/etc/pods/csi.yaml", "n1")
	if err != nil {
		t.Fatal(err)
	}
	if got := *pod.Spec.Containers[0].VolumeMounts[0].MountPropagation; got != "Bidirectional" {
		t.Errorf("mountPropagation = %q", got)
	}
}
