package admission

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/pods/internal/podtest"
	"github.com/nodeagent/nodeagent/pods/source"
)

// supportedPod uses a bit of everything nodeagent supports.
func supportedPod() *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p"},
		Spec: v1.PodSpec{
			AutomountServiceAccountToken: utilptr.To(false),
			NodeSelector:                 map[string]string{"kubernetes.io/os": "linux"},
			Tolerations:                  []v1.Toleration{{Operator: v1.TolerationOpExists}},
			PriorityClassName:            "system-node-critical",
			Priority:                     utilptr.To[int32](2000001000),
			OS:                           &v1.PodOS{Name: v1.Linux},
			InitContainers: []v1.Container{{
				Name: "init", Image: "busybox:1.36", Command: []string{"true"},
			}},
			Containers: []v1.Container{
				{
					Name: "a", Image: "busybox:1.36", Command: []string{"sh"}, Args: []string{"-c", "sleep 1d"},
					WorkingDir: "/data",
					Ports:      []v1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					Env: []v1.EnvVar{
						{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
						{Name: "PLAIN", Value: "x"},
					},
					Resources: v1.ResourceRequirements{
						Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("64Mi")},
						Requests: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
					},
					VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "host", MountPath: "/host", ReadOnly: true}},
				},
				{Name: "b", Image: "busybox:1.36", SecurityContext: &v1.SecurityContext{}, Stdin: true, StdinOnce: true, TTY: true},
			},
			EphemeralContainers: []v1.EphemeralContainer{{
				EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", Image: "busybox:1.36", Stdin: true, TTY: true},
				TargetContainerName:      "a",
			}},
			Volumes: []v1.Volume{
				{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
				{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/var/log", Type: utilptr.To(v1.HostPathDirectory)}}},
			},
		},
	}
	source.SetDefaults(pod)
	return pod
}

// withKubeAPIAccess adds kubeAPIAccess to p as spec.volumes[2], mounted in
// containers[1] as the API server does.
func withKubeAPIAccess(p *v1.Pod) {
	p.Spec.AutomountServiceAccountToken = nil
	p.Spec.ServiceAccountName = "default"
	p.Spec.Volumes = append(p.Spec.Volumes, podtest.KubeAPIAccess())
	p.Spec.Containers[1].VolumeMounts = append(p.Spec.Containers[1].VolumeMounts, v1.VolumeMount{
		Name: "kube-api-access-x2b4k", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true,
	})
}

func TestValidateSupportedPod(t *testing.T) {
	if err := source.ValidatePod(supportedPod()); err != nil {
		t.Errorf("ValidatePod: %v", err)
	}
}

func TestValidatePod(t *testing.T) {
	q := resource.MustParse
	tests := []struct {
		desc   string
		mutate func(p *v1.Pod)
		want   []string // every line of the error, in order
	}{
		{"name missing", func(p *v1.Pod) { p.Name = "" }, []string{"metadata.name: Required value"}},
		{"name not a subdomain", func(p *v1.Pod) { p.Name = "A_b" }, []string{`metadata.name: Invalid value: "A_b"`}},
		{"name with dots is fine", func(p *v1.Pod) { p.Name = "a.b-c" }, nil},
		{"namespace missing", func(p *v1.Pod) { p.Namespace = "" }, []string{"metadata.namespace: Required value"}},
		{"namespace not a label", func(p *v1.Pod) { p.Namespace = "a.b" }, []string{`metadata.namespace: Invalid value: "a.b"`}},
		{"no containers", func(p *v1.Pod) { p.Spec.Containers = nil; p.Spec.Volumes = nil },
			[]string{"spec.containers: Required value"}},
		{"container name missing", func(p *v1.Pod) { p.Spec.Containers[1].Name = "" },
			[]string{"spec.containers[1].name: Required value"}},
		{"container name not a label", func(p *v1.Pod) { p.Spec.Containers[1].Name = "B.c" },
			[]string{`spec.containers[1].name: Invalid value: "B.c"`}},
		{"duplicate across init and app containers", func(p *v1.Pod) { p.Spec.Containers[1].Name = "init" },
			[]string{`spec.containers[1].name: Duplicate value: "init"`}},
		{"duplicate init containers", func(p *v1.Pod) { p.Spec.InitContainers = append(p.Spec.InitContainers, p.Spec.InitContainers[0]) },
			[]string{`spec.initContainers[1].name: Duplicate value: "init"`}},
		{"image missing", func(p *v1.Pod) { p.Spec.InitContainers[0].Image = "" },
			[]string{"spec.initContainers[0].image: Required value"}},
		{"image with spaces", func(p *v1.Pod) { p.Spec.Containers[0].Image = "busybox " },
			[]string{`spec.containers[0].image: Invalid value: "busybox "`}},
		{"pull policy", func(p *v1.Pod) { p.Spec.Containers[0].ImagePullPolicy = "Sometimes" },
			[]string{`spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes"`}},
		{"relative workingDir", func(p *v1.Pod) { p.Spec.Containers[0].WorkingDir = "data" },
			[]string{`spec.containers[0].workingDir: Invalid value: "data"`}},
		{"env name", func(p *v1.Pod) { p.Spec.Containers[0].Env[1].Name = "1=x" },
			[]string{`spec.containers[0].env[1].name: Invalid value: "1=x"`}},
		{"env name missing", func(p *v1.Pod) { p.Spec.Containers[0].Env[1].Name = "" },
			[]string{`spec.containers[0].env[1].name: Required value`}},
		{"port out of range", func(p *v1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 70000 },
			[]string{`spec.containers[0].ports[0].containerPort: Invalid value: 70000`}},
		{"port protocol", func(p *v1.Pod) { p.Spec.Containers[0].Ports[0].Protocol = "ICMP" },
			[]string{`spec.containers[0].ports[0].protocol: Unsupported value: "ICMP"`}},
		{"hostNetwork hostPort differs", func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Ports[0].HostPort = 80
		}, []string{`spec.containers[0].ports[0].hostPort: Invalid value: 80: must match containerPort when hostNetwork is true`}},
		{"volume name duplicate", func(p *v1.Pod) { p.Spec.Volumes[1].Name = "data" },
			[]string{`spec.volumes[1].name: Duplicate value: "data"`, `spec.containers[0].volumeMounts[1].name: Not found: "host"`}},
		{"volume name not a label", func(p *v1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "X", VolumeSource: p.Spec.Volumes[0].VolumeSource})
		},
			[]string{`spec.volumes[2].name: Invalid value: "X"`}},
		{"volume name missing", func(p *v1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{VolumeSource: p.Spec.Volumes[0].VolumeSource})
		},
			[]string{`spec.volumes[2].name: Required value`}},
		{"volume without source", func(p *v1.Pod) { p.Spec.Volumes[0].EmptyDir = nil },
			[]string{`spec.volumes[0]: Required value: must specify a volume type`}},
		{"volume with two sources", func(p *v1.Pod) { p.Spec.Volumes[0].ConfigMap = &v1.ConfigMapVolumeSource{} },
			[]string{`spec.volumes[0].configMap: Forbidden: may not specify more than 1 volume type`}},
		{"hostPath relative", func(p *v1.Pod) { p.Spec.Volumes[1].HostPath.Path = "var/log" },
			[]string{`spec.volumes[1].hostPath.path: Invalid value: "var/log"`}},
		{"hostPath missing", func(p *v1.Pod) { p.Spec.Volumes[1].HostPath.Path = "" },
			[]string{`spec.volumes[1].hostPath.path: Required value`}},
		{"kube-api-access volume is fine", withKubeAPIAccess, nil},
		{"projected: empty source", func(p *v1.Pod) {
			withKubeAPIAccess(p)
			p.Spec.Volumes[2].Projected.Sources[1] = v1.VolumeProjection{}
		}, []string{`spec.volumes[2].projected.sources[1]: Forbidden: may have exactly one source`}},
		{"projected: two kinds in a source", func(p *v1.Pod) {
			withKubeAPIAccess(p)
			p.Spec.Volumes[2].Projected.Sources[1].Secret = &v1.SecretProjection{}
		}, []string{`spec.volumes[2].projected.sources[1]: Forbidden: may have exactly one source`}},
		{"projected: bad paths and modes", func(p *v1.Pod) {
			withKubeAPIAccess(p)
			pv := p.Spec.Volumes[2].Projected
			pv.DefaultMode = utilptr.To[int32](0o1777)
			pv.Sources[0].ServiceAccountToken.Path = "/token"
			pv.Sources[1].ConfigMap.Items[0].Path = "a/../../b"
			pv.Sources[1].ConfigMap.Items[0].Mode = utilptr.To[int32](-1)
			pv.Sources[2].DownwardAPI.Items[0].Path = "..data"
		}, []string{
			`spec.volumes[2].projected.defaultMode: Invalid value: 1023`,
			`spec.volumes[2].projected.sources[0].serviceAccountToken.path: Invalid value: "/token": must be relative`,
			`spec.volumes[2].projected.sources[1].configMap.items[0].path: Invalid value: "a/../../b": must not contain '..'`,
			`spec.volumes[2].projected.sources[1].configMap.items[0].mode: Invalid value: -1`,
			`spec.volumes[2].projected.sources[2].downwardAPI.items[0].path: Invalid value: "..data": must not start with '..'`,
		}},
		{"projected: duplicate path, missing fields, short token", func(p *v1.Pod) {
			withKubeAPIAccess(p)
			pv := p.Spec.Volumes[2].Projected
			pv.Sources[0].ServiceAccountToken.ExpirationSeconds = utilptr.To[int64](60)
			pv.Sources[1].ConfigMap.Name = ""
			pv.Sources[1].ConfigMap.Items[0] = v1.KeyToPath{Path: "token"}
			pv.Sources[2].DownwardAPI.Items[0].FieldRef = nil
		}, []string{
			`spec.volumes[2].projected.sources[0].serviceAccountToken.expirationSeconds: Invalid value: 60`,
			`spec.volumes[2].projected.sources[1].configMap.name: Required value`,
			`spec.volumes[2].projected.sources[1].configMap.items[0].key: Required value`,
			`spec.volumes[2].projected.sources[1].configMap.items[0].path: Invalid value: "token": conflicting duplicate paths`,
			`spec.volumes[2].projected.sources[2].downwardAPI.items[0].fieldRef: Required value`,
		}},
		{"mount of a missing volume", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[0].Name = "nope" },
			[]string{`spec.containers[0].volumeMounts[0].name: Not found: "nope"`}},
		{"mount relative", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[1].MountPath = "host" },
			[]string{`spec.containers[0].volumeMounts[1].mountPath: Invalid value: "host"`}},
		{"mount path missing", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[1].MountPath = "" },
			[]string{`spec.containers[0].volumeMounts[1].mountPath: Required value`}},
		{"negative limit", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Limits[v1.ResourceMemory] = q("-1") },
			[]string{`spec.containers[0].resources.limits[memory]: Invalid value: "-1": must be greater than or equal to 0`}},
		{"request above limit", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = q("2") },
			[]string{`spec.containers[0].resources.requests[cpu]: Invalid value: "2": must be less than or equal to cpu limit of 1`}},
		{"hugepages: whole pages, equal to the limit, beside cpu or memory", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits["hugepages-2Mi"] = q("4Mi")
			p.Spec.Containers[0].Resources.Requests["hugepages-2Mi"] = q("4Mi")
		}, nil},
		{"hugepages request not equal to the limit", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits["hugepages-2Mi"] = q("4Mi")
			p.Spec.Containers[0].Resources.Requests["hugepages-2Mi"] = q("2Mi")
		}, []string{`spec.containers[0].resources.requests: Invalid value: "2Mi": must be equal to hugepages-2Mi limit of 4Mi`}},
		{"hugepages request without a limit", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests["hugepages-2Mi"] = q("2Mi")
		}, []string{`spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources`}},
		{"hugepages not in whole pages", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits["hugepages-2Mi"] = q("3Mi")
			p.Spec.Containers[0].Resources.Requests["hugepages-2Mi"] = q("3Mi")
		}, []string{
			`spec.containers[0].resources.limits[hugepages-2Mi]: Invalid value: "3Mi": 3Mi is not positive integer multiple of hugepages-2Mi`,
			`spec.containers[0].resources.requests[hugepages-2Mi]: Invalid value: "3Mi": 3Mi is not positive integer multiple of hugepages-2Mi`,
		}},
		{"hugepages alone", func(p *v1.Pod) {
			p.Spec.Containers[1].Resources = v1.ResourceRequirements{Limits: v1.ResourceList{"hugepages-2Mi": q("2Mi")}, Requests: v1.ResourceList{"hugepages-2Mi": q("2Mi")}}
		}, []string{`spec.containers[1].resources: Forbidden: HugePages require cpu or memory`}},
		{"request without limit is fine", func(p *v1.Pod) { p.Spec.Containers[1].Resources.Requests = v1.ResourceList{"cpu": q("64")} }, nil},
		{"restartPolicy", func(p *v1.Pod) { p.Spec.RestartPolicy = "Sometimes" },
			[]string{`spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"`}},
		{"restartPolicy missing", func(p *v1.Pod) { p.Spec.RestartPolicy = "" }, []string{`spec.restartPolicy: Required value`}},
		{"negative grace period", func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = utilptr.To[int64](-1) },
			[]string{`spec.terminationGracePeriodSeconds: Invalid value: -1: must be greater than or equal to 0`}},
		{"zero grace period is fine", func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = utilptr.To[int64](0) }, nil},
		{"every problem at once", func(p *v1.Pod) {
			p.Name = ""
			p.Spec.Containers[0].Image = ""
			p.Spec.RestartPolicy = "x"
		}, []string{"metadata.name: Required value", "spec.containers[0].image: Required value", `spec.restartPolicy: Unsupported value: "x"`}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			pod := supportedPod()
			tt.mutate(pod)
			err := source.ValidatePod(pod)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("ValidatePod: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidatePod = nil, want %q", tt.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("ValidatePod =\n%v\nwant %d problems: %q", err, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("problem %d = %q, want prefix %q", i, lines[i], w)
				}
			}
		})
	}
}

// unsupportedCases sets one unsupported field each on supportedPod and
// names the path Unsupported must report. TestUnsupportedTablesCovered
// checks that every check in the tables has a case here (volume sources
// and security context fields are generated in TestUnsupportedGenerated).
var unsupportedCases = []struct {
	want   string
	mutate func(p *v1.Pod)
}{
	// Pod spec.
	{"spec.shareProcessNamespace", func(p *v1.Pod) {
		p.Spec.HostUsers = utilptr.To(false)
		p.Spec.ShareProcessNamespace = utilptr.To(true)
	}},
	{"spec.hostNetwork", func(p *v1.Pod) { p.Spec.HostUsers = utilptr.To(false); p.Spec.HostNetwork = true }},
	{"spec.resourceClaims", func(p *v1.Pod) { p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "c"}} }},
	// Pod-level resources: cpu and memory are supported; hugepages (which
	// the API server accepts there) and claims are not.
	{"spec.resources.limits[hugepages-2Mi]", func(p *v1.Pod) {
		p.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{
			"hugepages-2Mi": resource.MustParse("2Mi"), v1.ResourceCPU: resource.MustParse("1")}}
	}},
	{"spec.resources.requests[hugepages-1Gi]", func(p *v1.Pod) {
		p.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{"hugepages-1Gi": resource.MustParse("1Gi")}}
	}},
	{"spec.resources.claims", func(p *v1.Pod) {
		p.Spec.Resources = &v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "c"}}}
	}},
	{"spec.hostnameOverride", func(p *v1.Pod) { p.Spec.HostnameOverride = utilptr.To("h") }},

	// Containers.
	{"spec.containers[1].restartPolicy", func(p *v1.Pod) { p.Spec.Containers[1].RestartPolicy = utilptr.To(v1.ContainerRestartPolicyNever) }},
	{"spec.initContainers[0].restartPolicy", func(p *v1.Pod) { p.Spec.InitContainers[0].RestartPolicy = utilptr.To(v1.ContainerRestartPolicyNever) }},
	{"spec.containers[1].restartPolicyRules", func(p *v1.Pod) {
		p.Spec.Containers[1].RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart}}
	}},
	{"spec.containers[1].securityContext.procMount", func(p *v1.Pod) {
		p.Spec.Containers[1].SecurityContext.ProcMount = utilptr.To(v1.UnmaskedProcMount)
	}},

	// Ports.
	// Env.
	{"spec.containers[0].env[0].valueFrom.fileKeyRef", func(p *v1.Pod) {
		p.Spec.Containers[0].Env[0].ValueFrom = &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{Key: "k"}}
	}},
	{"spec.containers[0].env[0].valueFrom.fieldRef", func(p *v1.Pod) {
		p.Spec.Containers[0].Env[0].ValueFrom.FieldRef.FieldPath = "metadata.labels"
	}},
	{"spec.containers[0].env[0].valueFrom.fieldRef", func(p *v1.Pod) {
		p.Spec.Containers[0].Env[0].ValueFrom.FieldRef.FieldPath = "metadata.generateName"
	}},
	{"spec.containers[0].env[0].valueFrom.fieldRef", func(p *v1.Pod) {
		p.Spec.Containers[0].Env[0].ValueFrom.FieldRef.APIVersion = "v2"
	}},

	// Volume mounts.
	{"spec.containers[0].volumeMounts[1].recursiveReadOnly", func(p *v1.Pod) {
		p.Spec.Containers[0].VolumeMounts[1].RecursiveReadOnly = utilptr.To(v1.RecursiveReadOnlyEnabled)
	}},

	// Resources.
	{"spec.containers[0].resources.claims", func(p *v1.Pod) {
		p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	}},
	{"spec.containers[0].resources.requests[kubernetes.io/custom]", func(p *v1.Pod) {
		// Not an extended resource (kubernetes.io/ is the native prefix);
		// example.com/gpu is accepted (device plugins).
		p.Spec.Containers[0].Resources.Requests["kubernetes.io/custom"] = resource.MustParse("1")
	}},

	// Volumes beyond their source type.
	{"spec.volumes[0].emptyDir.medium", func(p *v1.Pod) { p.Spec.Volumes[0].EmptyDir.Medium = "Tmpfs" }},

	// Projected volumes beyond their supported sources.
	{"spec.volumes[2].projected.sources[1].clusterTrustBundle", func(p *v1.Pod) {
		withKubeAPIAccess(p)
		p.Spec.Volumes[2].Projected.Sources[1] = v1.VolumeProjection{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Path: "b"}}
	}},
	{"spec.volumes[2].projected.sources[1].podCertificate", func(p *v1.Pod) {
		withKubeAPIAccess(p)
		p.Spec.Volumes[2].Projected.Sources[1] = v1.VolumeProjection{PodCertificate: &v1.PodCertificateProjection{SignerName: "x/y"}}
	}},
	{"spec.volumes[2].projected.sources[2].downwardAPI.items[0].fieldRef", func(p *v1.Pod) {
		withKubeAPIAccess(p)
		p.Spec.Volumes[2].Projected.Sources[2].DownwardAPI.Items[0].FieldRef.FieldPath = "spec.nodeName"
	}},
	{"spec.volumes[2].projected.sources[2].downwardAPI.items[0].fieldRef", func(p *v1.Pod) {
		withKubeAPIAccess(p)
		p.Spec.Volumes[2].Projected.Sources[2].DownwardAPI.Items[0].FieldRef.APIVersion = "v2"
	}},
	{"spec.volumes[2].projected.sources[2].downwardAPI.items[0].fieldRef", func(p *v1.Pod) {
		withKubeAPIAccess(p)
		p.Spec.Volumes[2].Projected.Sources[2].DownwardAPI.Items[0].FieldRef.FieldPath = "metadata.labels['']"
	}},
	{"spec.volumes[1].downwardAPI.items[0].fieldRef", func(p *v1.Pod) {
		p.Spec.Volumes[1] = v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
			Items: []v1.DownwardAPIVolumeFile{{Path: "ip", FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		}}}
	}},
}

func TestUnsupportedSupportedPod(t *testing.T) {
	tests := []struct {
		desc   string
		mutate func(p *v1.Pod)
	}{
		{"as is", func(p *v1.Pod) {}},
		{"scheduler fields", func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{}
			p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1}}
			p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "g"}}
			p.Spec.ServiceAccountName = "default"
			p.Spec.PreemptionPolicy = utilptr.To(v1.PreemptNever)
		}},
		{"no securityContext at all", func(p *v1.Pod) { p.Spec.SecurityContext = nil; p.Spec.Containers[1].SecurityContext = nil }},
		{"huge pages: hugepages-<size> resources and hugetlbfs emptyDirs", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits["hugepages-2Mi"] = resource.MustParse("4Mi")
			p.Spec.Containers[0].Resources.Requests["hugepages-2Mi"] = resource.MustParse("4Mi")
			p.Spec.Volumes[0].EmptyDir.Medium = v1.StorageMediumHugePages
			p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "huge", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: "HugePages-2Mi"}}})
		}},
		{"local storage limits, enforced by eviction", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits[v1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
			p.Spec.Volumes[0].EmptyDir = &v1.EmptyDirVolumeSource{SizeLimit: utilptr.To(resource.MustParse("1Gi"))}
		}},
		{"hostPort on a hostNetwork pod", func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Ports[0].HostPort = 8080
		}},
		{"hostPort and hostIP on the pod network (CNI portMappings)", func(p *v1.Pod) {
			p.Spec.Containers[0].Ports[0].HostPort = 8080
			p.Spec.Containers[0].Ports[0].HostIP = "127.0.0.1"
		}},
		{"hostUsers true", func(p *v1.Pod) { p.Spec.HostUsers = utilptr.To(true) }},
		{"hostUsers false, procMount Unmasked", func(p *v1.Pod) {
			p.Spec.HostUsers = utilptr.To(false)
			p.Spec.Containers[1].SecurityContext.ProcMount = utilptr.To(v1.UnmaskedProcMount)
		}},
		{"name service", func(p *v1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain = "h", "s"
			p.Spec.SetHostnameAsFQDN = utilptr.To(true)
			p.Spec.HostAliases = []v1.HostAlias{{IP: "192.0.2.9", Hostnames: []string{"a"}}}
			p.Spec.DNSConfig = &v1.PodDNSConfig{Searches: []string{"x"}}
			p.Spec.EnableServiceLinks = utilptr.To(false)
		}},
		{"env sources", func(p *v1.Pod) {
			c := &p.Spec.Containers[1]
			c.EnvFrom = []v1.EnvFromSource{
				{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "c"}}, Prefix: "P_"},
				{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Optional: utilptr.To(true)}},
			}
			c.Env = append(c.Env,
				v1.EnvVar{Name: "A", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{Key: "k"}}},
				v1.EnvVar{Name: "B", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{Key: "k"}}},
				v1.EnvVar{Name: "C", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}}},
				v1.EnvVar{Name: "D", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
				v1.EnvVar{Name: "E", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.annotations['x.io/y']"}}},
			)
		}},
		{"shareProcessNamespace", func(p *v1.Pod) { p.Spec.ShareProcessNamespace = utilptr.To(true) }},
		{"false booleans", func(p *v1.Pod) {
			p.Spec.ShareProcessNamespace = utilptr.To(false)
			p.Spec.SetHostnameAsFQDN = utilptr.To(false)
		}},
		{"mount propagation None, recursiveReadOnly Disabled", func(p *v1.Pod) {
			p.Spec.Containers[0].VolumeMounts[0].MountPropagation = utilptr.To(v1.MountPropagationNone)
			p.Spec.Containers[0].VolumeMounts[0].RecursiveReadOnly = utilptr.To(v1.RecursiveReadOnlyDisabled)
		}},
		// Whether Bidirectional is allowed (privileged containers only) is
		// validation's (source.ValidatePod, the API server), not admission's.
		{"mount propagation HostToContainer and Bidirectional", func(p *v1.Pod) {
			p.Spec.Containers[0].VolumeMounts[0].MountPropagation = utilptr.To(v1.MountPropagationHostToContainer)
			p.Spec.Containers[0].VolumeMounts[1].MountPropagation = utilptr.To(v1.MountPropagationBidirectional)
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: utilptr.To(true)}
		}},
		{"disk emptyDir", func(p *v1.Pod) { p.Spec.Volumes[0].EmptyDir.Medium = v1.StorageMediumDefault }},
		{"Memory emptyDir with sizeLimit", func(p *v1.Pod) { p.Spec.Volumes[0].EmptyDir.SizeLimit = utilptr.To(resource.MustParse("64Mi")) }},
		{"no os", func(p *v1.Pod) { p.Spec.OS = nil }},
		{"restricted PodSecurity profile", func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{
				RunAsNonRoot: utilptr.To(true), RunAsUser: utilptr.To[int64](1000), RunAsGroup: utilptr.To[int64](1000),
				FSGroup: utilptr.To[int64](2000), SupplementalGroups: []int64{3000},
				SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault},
				Sysctls:        []v1.Sysctl{{Name: "net.ipv4.ping_group_range", Value: "0 1"}},
			}
			p.Spec.Containers[1].SecurityContext = &v1.SecurityContext{
				AllowPrivilegeEscalation: utilptr.To(false),
				Capabilities:             &v1.Capabilities{Drop: []v1.Capability{"ALL"}, Add: []v1.Capability{"NET_BIND_SERVICE"}},
				ReadOnlyRootFilesystem:   utilptr.To(true), ProcMount: utilptr.To(v1.DefaultProcMount),
			}
		}},
		{"runtimeClassName with overhead", func(p *v1.Pod) {
			p.Spec.RuntimeClassName = utilptr.To("kata")
			p.Spec.Overhead = v1.ResourceList{"cpu": resource.MustParse("10m")}
		}},
		{"host namespaces and privileged", func(p *v1.Pod) {
			p.Spec.HostPID, p.Spec.HostIPC = true, true
			p.Spec.Containers[1].SecurityContext = &v1.SecurityContext{Privileged: utilptr.To(true)}
		}},
		{"kube-api-access projected volume", withKubeAPIAccess},
		{"projected configMap without items, optional", func(p *v1.Pod) {
			withKubeAPIAccess(p)
			p.Spec.Volumes[2].Projected.Sources[1].ConfigMap.Items = nil
			p.Spec.Volumes[2].Projected.Sources[1].ConfigMap.Optional = utilptr.To(true)
		}},
		{"projected token with audience", func(p *v1.Pod) {
			withKubeAPIAccess(p)
			p.Spec.Volumes[2].Projected.Sources[0].ServiceAccountToken.Audience = "vault"
		}},
		{"projected secret", func(p *v1.Pod) {
			withKubeAPIAccess(p)
			p.Spec.Volumes[2].Projected.Sources[1] = v1.VolumeProjection{Secret: &v1.SecretProjection{
				LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Items: []v1.KeyToPath{{Key: "k", Path: "p", Mode: utilptr.To[int32](0o400)}}, Optional: utilptr.To(true),
			}}
		}},
		{"projected downwardAPI resourceFieldRef, one label", func(p *v1.Pod) {
			withKubeAPIAccess(p)
			p.Spec.Volumes[2].Projected.Sources[2].DownwardAPI.Items = []v1.DownwardAPIVolumeFile{
				{Path: "cpu", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.cpu", Divisor: resource.MustParse("1m")}},
				{Path: "app", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}},
			}
		}},
		{"secret, configMap and downwardAPI volumes", func(p *v1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes,
				v1.Volume{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{
					SecretName: "s", Items: []v1.KeyToPath{{Key: "k", Path: "p"}}, DefaultMode: utilptr.To[int32](0o400), Optional: utilptr.To(true),
				}}},
				v1.Volume{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
					LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Items: []v1.KeyToPath{{Key: "k", Path: "p"}}, DefaultMode: utilptr.To[int32](0o400), Optional: utilptr.To(true),
				}}},
				v1.Volume{Name: "d", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
					DefaultMode: utilptr.To[int32](0o400),
					Items: []v1.DownwardAPIVolumeFile{
						{Path: "labels", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels"}},
						{Path: "note", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.annotations['note']"}},
						{Path: "mem", Mode: utilptr.To[int32](0o600), ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "c", Resource: "requests.memory"}},
					},
				}}})
		}},
		{"subPath and subPathExpr", func(p *v1.Pod) {
			p.Spec.Containers[0].VolumeMounts[1].SubPath = "x"
			p.Spec.Containers[1].VolumeMounts = append(p.Spec.Containers[1].VolumeMounts, v1.VolumeMount{Name: p.Spec.Volumes[0].Name, MountPath: "/y", SubPathExpr: "$(POD)"})
		}},
	}
	for _, path := range sets.List(downwardAPIFieldPaths) {
		tests = append(tests, struct {
			desc   string
			mutate func(p *v1.Pod)
		}{"projected downwardAPI " + path, func(p *v1.Pod) {
			withKubeAPIAccess(p)
			p.Spec.Volumes[2].Projected.Sources[2].DownwardAPI.Items[0].FieldRef.FieldPath = path
			p.Spec.Volumes[2].Projected.Sources[2].DownwardAPI.Items[0].Mode = utilptr.To[int32](0o600)
		}})
	}
	for _, path := range sortedFieldPaths() {
		tests = append(tests, struct {
			desc   string
			mutate func(p *v1.Pod)
		}{"fieldRef " + path, func(p *v1.Pod) { p.Spec.Containers[0].Env[0].ValueFrom.FieldRef.FieldPath = path }})
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			pod := supportedPod()
			tt.mutate(pod)
			if got := Unsupported(pod); got != nil {
				t.Errorf("Unsupported = %q, want nil", got)
			}
		})
	}
}

func sortedFieldPaths() []string {
	paths := supportedFieldPaths.UnsortedList()
	slices.Sort(paths)
	if len(paths) != 9 {
		panic(fmt.Sprintf("supported fieldRef paths changed: %v", paths))
	}
	return paths
}

func TestUnsupportedField(t *testing.T) {
	for _, tt := range unsupportedCases {
		t.Run(tt.want, func(t *testing.T) {
			pod := supportedPod()
			tt.mutate(pod)
			if d := cmp.Diff([]string{tt.want}, Unsupported(pod)); d != "" {
				t.Errorf("Unsupported (-want +got):\n%s", d)
			}
		})
	}
}

// nonZero returns a value of type t that is not its zero value.
func nonZero(t *testing.T, typ reflect.Type) reflect.Value {
	switch typ.Kind() {
	case reflect.Pointer:
		return reflect.New(typ.Elem())
	case reflect.Slice:
		return reflect.MakeSlice(typ, 1, 1)
	case reflect.Map:
		m := reflect.MakeMapWithSize(typ, 1)
		m.SetMapIndex(reflect.New(typ.Key()).Elem(), reflect.New(typ.Elem()).Elem())
		return m
	case reflect.String:
		return reflect.ValueOf("x").Convert(typ)
	case reflect.Bool:
		return reflect.ValueOf(true)
	}
	t.Fatalf("nonZero: unhandled kind %s", typ)
	return reflect.Value{}
}

// TestUnsupportedGenerated sets every field of the structures where any use
// is unsupported (other volume sources, security context fields) by
// reflection, so that a field added to k8s.io/api is covered without a new
// case.
func TestUnsupportedGenerated(t *testing.T) {
	gen := []struct {
		prefix   string
		typ      reflect.Type
		accepted []string
		target   func(p *v1.Pod) reflect.Value // the struct to set a field in
	}{
		{"spec.volumes[1].", reflect.TypeOf(v1.VolumeSource{}), volumeSourceAccepted, func(p *v1.Pod) reflect.Value {
			// A second source is a validation error; Unsupported names it
			// anyway. Replace hostPath to keep the pod valid.
			p.Spec.Volumes[1].HostPath = nil
			return reflect.ValueOf(&p.Spec.Volumes[1].VolumeSource).Elem()
		}},
		{"spec.volumes[2].projected.sources[1].", reflect.TypeOf(v1.VolumeProjection{}), volumeProjectionAccepted, func(p *v1.Pod) reflect.Value {
			withKubeAPIAccess(p)
			p.Spec.Volumes[2].Projected.Sources[1] = v1.VolumeProjection{}
			return reflect.ValueOf(&p.Spec.Volumes[2].Projected.Sources[1]).Elem()
		}},
	}
	for _, g := range gen {
		for i := 0; i < g.typ.NumField(); i++ {
			f := g.typ.Field(i)
			name := jsonName(f)
			if slices.Contains(g.accepted, name) {
				continue
			}
			t.Run(g.prefix+name, func(t *testing.T) {
				pod := supportedPod()
				g.target(pod).Field(i).Set(nonZero(t, f.Type))
				if d := cmp.Diff([]string{g.prefix + name}, Unsupported(pod)); d != "" {
					t.Errorf("Unsupported (-want +got):\n%s", d)
				}
			})
		}
	}
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

func checkNames[T any](checks []check[T]) []string {
	var names []string
	for _, c := range checks {
		names = append(names, c.field)
	}
	return names
}

// TestUnsupportedTablesClassifyEveryField fails when k8s.io/api gains a
// field that the checker neither accepts nor refuses: decide which, and add
// it to the accepted list or the checks (with a case in unsupportedCases).
func TestUnsupportedTablesClassifyEveryField(t *testing.T) {
	tables := []struct {
		typ        reflect.Type
		accepted   []string
		refused    []string
		unchecked  []string // a field of the type nodeagent neither runs nor refuses
		refusedAny bool     // every field is refused (security contexts)
	}{
		{typ: reflect.TypeOf(v1.PodSpec{}), accepted: podSpecAccepted, refused: checkNames(podSpecChecks)},
		{typ: reflect.TypeOf(v1.PodSecurityContext{}), accepted: podSecurityContextAccepted, refused: checkNames(podSecurityContextChecks)},
		{typ: reflect.TypeOf(v1.Container{}), accepted: containerAccepted, refused: checkNames(containerChecks)},
		{typ: reflect.TypeOf(v1.SecurityContext{}), accepted: securityContextAccepted, refused: checkNames(securityContextChecks)},
		{typ: reflect.TypeOf(v1.ContainerPort{}), accepted: containerPortAccepted, refused: checkNames(containerPortChecks)},
		{typ: reflect.TypeOf(v1.EnvVarSource{}), accepted: envVarSourceAccepted, refused: checkNames(envVarSourceChecks)},
		{typ: reflect.TypeOf(v1.VolumeMount{}), accepted: volumeMountAccepted, refused: checkNames(volumeMountChecks)},
		{typ: reflect.TypeOf(v1.ResourceRequirements{}), accepted: resourceRequirementsAccepted, refused: checkNames(resourceRequirementsChecks)},
		{typ: reflect.TypeOf(v1.VolumeSource{}), accepted: volumeSourceAccepted, refused: checkNames(volumeSourceChecks)},
		{typ: reflect.TypeOf(v1.EmptyDirVolumeSource{}), accepted: emptyDirAccepted, refused: checkNames(emptyDirChecks)},
		{typ: reflect.TypeOf(v1.HostPathVolumeSource{}), accepted: hostPathAccepted},
		{typ: reflect.TypeOf(v1.ProjectedVolumeSource{}), accepted: projectedAccepted},
		{typ: reflect.TypeOf(v1.VolumeProjection{}), accepted: volumeProjectionAccepted, refused: checkNames(volumeProjectionChecks)},
		{typ: reflect.TypeOf(v1.DownwardAPIVolumeFile{}), accepted: downwardAPIFileAccepted, refused: checkNames(downwardAPIFileChecks)},
		// The accepted projections are used whole; "" is the inlined
		// LocalObjectReference (name).
		{typ: reflect.TypeOf(v1.ServiceAccountTokenProjection{}), accepted: []string{"audience", "expirationSeconds", "path"}},
		{typ: reflect.TypeOf(v1.ConfigMapProjection{}), accepted: []string{"", "items", "optional"}},
		{typ: reflect.TypeOf(v1.KeyToPath{}), accepted: []string{"key", "path", "mode"}},
		{typ: reflect.TypeOf(v1.DownwardAPIProjection{}), accepted: []string{"items"}},
		{typ: reflect.TypeOf(v1.SecretProjection{}), accepted: []string{"", "items", "optional"}},
		{typ: reflect.TypeOf(v1.SecretVolumeSource{}), accepted: []string{"secretName", "items", "defaultMode", "optional"}},
		{typ: reflect.TypeOf(v1.ConfigMapVolumeSource{}), accepted: []string{"", "items", "defaultMode", "optional"}},
		{typ: reflect.TypeOf(v1.DownwardAPIVolumeSource{}), accepted: []string{"items", "defaultMode"}},
		{typ: reflect.TypeOf(v1.ResourceFieldSelector{}), accepted: []string{"containerName", "resource", "divisor"}},
		{typ: reflect.TypeOf(v1.ObjectFieldSelector{}), accepted: []string{"apiVersion", "fieldPath"}},
		// EnvVar and Volume are walked by hand: name and value; name and
		// the inlined VolumeSource.
		{typ: reflect.TypeOf(v1.EnvVar{}), accepted: []string{"name", "value", "valueFrom"}},
		{typ: reflect.TypeOf(v1.Volume{}), accepted: []string{"name", ""}},
	}
	for _, tt := range tables {
		t.Run(tt.typ.Name(), func(t *testing.T) {
			classified := map[string]string{}
			for _, n := range tt.accepted {
				classified[n] = "accepted"
			}
			for _, n := range tt.refused {
				if c, dup := classified[n]; dup {
					t.Errorf("field %q is both %s and refused", n, c)
				}
				classified[n] = "refused"
			}
			fields := map[string]bool{}
			for i := 0; i < tt.typ.NumField(); i++ {
				n := jsonName(tt.typ.Field(i))
				fields[n] = true
				if _, ok := classified[n]; !ok {
					t.Errorf("%s.%s is neither accepted nor refused by Unsupported: classify it", tt.typ.Name(), n)
				}
			}
			for n := range classified {
				if !fields[n] {
					t.Errorf("%s has no field %q", tt.typ.Name(), n)
				}
			}
		})
	}
}

// TestUnsupportedTablesCovered: every check in the hand-tested tables has
// a case in unsupportedCases.
func TestUnsupportedTablesCovered(t *testing.T) {
	wanted := map[string]bool{}
	for _, c := range unsupportedCases {
		wanted[c.want] = true
	}
	need := func(prefix string, names []string) {
		for _, n := range names {
			if !wanted[prefix+n] {
				t.Errorf("no case in unsupportedCases for %s%s", prefix, n)
			}
		}
	}
	need("spec.", checkNames(podSpecChecks))
	need("spec.containers[1].", checkNames(containerChecks))
	need("spec.containers[0].ports[0].", checkNames(containerPortChecks))
	need("spec.containers[0].env[0].valueFrom.", checkNames(envVarSourceChecks))
	need("spec.containers[0].volumeMounts[1].", checkNames(volumeMountChecks))
	need("spec.containers[0].resources.", checkNames(resourceRequirementsChecks))
	need("spec.volumes[0].emptyDir.", checkNames(emptyDirChecks))
	need("spec.volumes[2].projected.sources[1].", checkNames(volumeProjectionChecks))
	need("spec.volumes[2].projected.sources[2].downwardAPI.items[0].", checkNames(downwardAPIFileChecks))
}

// TestUnsupportedAPIPodWithServiceAccountToken: what `kubectl run` creates
// (the API server adds kube-api-access-*) is supported; a secret next to
// it is named by its source.
func TestUnsupportedAPIPodWithServiceAccountToken(t *testing.T) {
	pod := supportedPod()
	withKubeAPIAccess(pod)
	if got := Unsupported(pod); got != nil {
		t.Errorf("Unsupported = %q, want nil", got)
	}
	pod.Spec.Volumes[2].Projected.Sources = append(pod.Spec.Volumes[2].Projected.Sources,
		v1.VolumeProjection{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Path: "b"}})
	if d := cmp.Diff([]string{"spec.volumes[2].projected.sources[3].clusterTrustBundle"}, Unsupported(pod)); d != "" {
		t.Errorf("Unsupported (-want +got):\n%s", d)
	}
}

func TestUnsupportedManySorted(t *testing.T) {
	pod := supportedPod()
	pod.Spec.Containers[1].TTY = true
	pod.Spec.Containers[1].SecurityContext.ProcMount = utilptr.To(v1.UnmaskedProcMount)
	pod.Spec.Containers[0].Stdin = true
	pod.Spec.Volumes[1] = v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{}}}
	pod.Spec.InitContainers[0].RestartPolicy = utilptr.To(v1.ContainerRestartPolicyOnFailure)
	want := []string{
		"spec.containers[1].securityContext.procMount",
		"spec.initContainers[0].restartPolicy",
		"spec.volumes[1].nfs",
	}
	if d := cmp.Diff(want, Unsupported(pod)); d != "" {
		t.Errorf("Unsupported (-want +got):\n%s", d)
	}
}

func TestUnsupportedMessage(t *testing.T) {
	many := make([]string, 13)
	for i := range many {
		many[i] = fmt.Sprintf("spec.f%02d", i)
	}
	tests := []struct {
		paths []string
		want  string
	}{
		{[]string{"spec.hostPID"}, "Pod was rejected: nodeagent does not support: spec.hostPID"},
		{[]string{"a", "b", "c"}, "Pod was rejected: nodeagent does not support: a, b, c"},
		{many[:10], "Pod was rejected: nodeagent does not support: " + strings.Join(many[:10], ", ")},
		{many, "Pod was rejected: nodeagent does not support: " + strings.Join(many[:10], ", ") + ", and 3 more"},
	}
	for _, tt := range tests {
		if got := UnsupportedMessage(tt.paths); got != tt.want {
			t.Errorf("UnsupportedMessage(%d paths) =\n%q\nwant\n%q", len(tt.paths), got, tt.want)
		}
	}
}

func podWith(uid string, init []v1.ResourceList, app ...v1.ResourceList) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)}}
	for i, r := range init {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: fmt.Sprintf("i%d", i), Resources: v1.ResourceRequirements{Requests: r}})
	}
	for i, r := range app {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: fmt.Sprintf("c%d", i), Resources: v1.ResourceRequirements{Requests: r}})
	}
	return p
}

func TestFitsNode(t *testing.T) {
	rl := func(kv ...string) v1.ResourceList {
		l := v1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	alloc := rl("cpu", "2", "memory", "1Gi", "ephemeral-storage", "10Gi", "pods", "110")
	withGPU := rl("cpu", "2", "memory", "1Gi", "ephemeral-storage", "10Gi", "pods", "110", "example.com/gpu", "2")
	zeroGPU := rl("cpu", "2", "memory", "1Gi", "ephemeral-storage", "10Gi", "pods", "110", "example.com/gpu", "0")
	withHuge := rl("cpu", "2", "memory", "1Gi", "ephemeral-storage", "10Gi", "pods", "110", "hugepages-2Mi", "8Mi", "hugepages-1Gi", "0")
	limitsOnly := podWith("lim", nil, nil)
	limitsOnly.Spec.Containers[0].Resources.Limits = rl("memory", "900Mi")

	tests := []struct {
		desc     string
		pod      *v1.Pod
		admitted []*v1.Pod
		alloc    v1.ResourceList
		maxPods  int
		reason   string
		message  string
	}{
		{desc: "empty node", pod: podWith("new", nil, rl("cpu", "1")), alloc: alloc, maxPods: 110},
		{desc: "no requests fits a full node", pod: podWith("new", nil, nil),
			admitted: []*v1.Pod{podWith("a", nil, rl("cpu", "2", "memory", "1Gi"))}, alloc: alloc, maxPods: 110},
		{desc: "pods", pod: podWith("new", nil, nil),
			admitted: []*v1.Pod{podWith("a", nil, nil), podWith("b", nil, nil)}, alloc: alloc, maxPods: 2,
			reason: "OutOfpods", message: "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"},
		{desc: "pods: own entry ignored", pod: podWith("a", nil, nil),
			admitted: []*v1.Pod{podWith("a", nil, nil), podWith("b", nil, nil)}, alloc: alloc, maxPods: 2},
		{desc: "maxPods 0 is no limit", pod: podWith("new", nil, nil),
			admitted: []*v1.Pod{podWith("a", nil, nil)}, alloc: alloc, maxPods: 0},
		{desc: "cpu exactly fits", pod: podWith("new", nil, rl("cpu", "500m")),
			admitted: []*v1.Pod{podWith("a", nil, rl("cpu", "1500m"))}, alloc: alloc, maxPods: 110},
		{desc: "cpu", pod: podWith("new", nil, rl("cpu", "500m"), rl("cpu", "1m")),
			admitted: []*v1.Pod{podWith("a", nil, rl("cpu", "1500m"))}, alloc: alloc, maxPods: 110,
			reason: "OutOfcpu", message: "Pod was rejected: Node didn't have enough resource: cpu, requested: 501, used: 1500, capacity: 2000"},
		{desc: "memory", pod: podWith("new", nil, rl("memory", "512Mi")),
			admitted: []*v1.Pod{podWith("a", nil, rl("memory", "768Mi"))}, alloc: alloc, maxPods: 110,
			reason: "OutOfmemory", message: "Pod was rejected: Node didn't have enough resource: memory, requested: 536870912, used: 805306368, capacity: 1073741824"},
		{desc: "ephemeral-storage", pod: podWith("new", nil, rl("ephemeral-storage", "11Gi")), alloc: alloc, maxPods: 110,
			reason: "OutOfephemeral-storage", message: "Pod was rejected: Node didn't have enough resource: ephemeral-storage, requested: 11811160064, used: 0, capacity: 10737418240"},
		{desc: "cpu reported before memory", pod: podWith("new", nil, rl("cpu", "3", "memory", "2Gi")), alloc: alloc, maxPods: 110,
			reason: "OutOfcpu", message: "Pod was rejected: Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000"},
		{desc: "pods reported before cpu", pod: podWith("new", nil, rl("cpu", "3")), alloc: alloc, maxPods: 0 + 1,
			admitted: []*v1.Pod{podWith("a", nil, nil)},
			reason:   "OutOfpods", message: "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1"},
		{desc: "extended resource not on the node is not checked (kubelet's removeMissingExtendedResources)",
			pod: podWith("new", nil, rl("example.com/gpu", "1")), alloc: alloc, maxPods: 110},
		{desc: "extended resource on the node", pod: podWith("new", nil, rl("example.com/gpu", "2")),
			admitted: []*v1.Pod{podWith("a", nil, rl("example.com/gpu", "1"))}, alloc: withGPU, maxPods: 110,
			reason: "OutOfexample.com/gpu", message: "Pod was rejected: Node didn't have enough resource: example.com/gpu, requested: 2, used: 1, capacity: 2"},
		{desc: "hugepages beyond what is reserved", pod: podWith("new", nil, rl("cpu", "1", "hugepages-2Mi", "8Mi")),
			admitted: []*v1.Pod{podWith("a", nil, rl("hugepages-2Mi", "2Mi"))}, alloc: withHuge, maxPods: 110,
			reason: "OutOfhugepages-2Mi", message: "Pod was rejected: Node didn't have enough resource: hugepages-2Mi, requested: 8388608, used: 2097152, capacity: 8388608"},
		{desc: "hugepages that fit", pod: podWith("new", nil, rl("cpu", "1", "hugepages-2Mi", "6Mi")),
			admitted: []*v1.Pod{podWith("a", nil, rl("hugepages-1Gi", "1Gi"))}, alloc: withHuge, maxPods: 110},
		{desc: "hugepages of a size none are reserved of (kubelet reports 0)", pod: podWith("new", nil, rl("memory", "1Mi", "hugepages-1Gi", "1Gi")), alloc: withHuge, maxPods: 110,
			reason: "OutOfhugepages-1Gi", message: "Pod was rejected: Node didn't have enough resource: hugepages-1Gi, requested: 1073741824, used: 0, capacity: 0"},
		{desc: "extended resource with allocatable 0", pod: podWith("new", nil, rl("example.com/gpu", "1")), alloc: zeroGPU, maxPods: 110,
			reason: "OutOfexample.com/gpu", message: "Pod was rejected: Node didn't have enough resource: example.com/gpu, requested: 1, used: 0, capacity: 0"},
		{desc: "init container larger than app containers counts", pod: podWith("new", []v1.ResourceList{rl("cpu", "1800m")}, rl("cpu", "100m"), rl("cpu", "100m")),
			admitted: []*v1.Pod{podWith("a", nil, rl("cpu", "500m"))}, alloc: alloc, maxPods: 110,
			reason: "OutOfcpu", message: "Pod was rejected: Node didn't have enough resource: cpu, requested: 1800, used: 500, capacity: 2000"},
		{desc: "app containers sum beyond the init container", pod: podWith("new", []v1.ResourceList{rl("cpu", "100m")}, rl("cpu", "1"), rl("cpu", "1")),
			admitted: []*v1.Pod{podWith("a", nil, rl("cpu", "1m"))}, alloc: alloc, maxPods: 110,
			reason: "OutOfcpu", message: "Pod was rejected: Node didn't have enough resource: cpu, requested: 2000, used: 1, capacity: 2000"},
		{desc: "admitted pod's init container counts", pod: podWith("new", nil, rl("cpu", "1")),
			admitted: []*v1.Pod{podWith("a", []v1.ResourceList{rl("cpu", "1500m")}, rl("cpu", "100m"))}, alloc: alloc, maxPods: 110,
			reason: "OutOfcpu", message: "Pod was rejected: Node didn't have enough resource: cpu, requested: 1000, used: 1500, capacity: 2000"},
		{desc: "limit without request counts as request", pod: podWith("new", nil, rl("memory", "200Mi")),
			admitted: []*v1.Pod{limitsOnly}, alloc: alloc, maxPods: 110,
			reason: "OutOfmemory", message: "Pod was rejected: Node didn't have enough resource: memory, requested: 209715200, used: 943718400, capacity: 1073741824"},
		{desc: "overhead counts", pod: func() *v1.Pod {
			p := podWith("new", nil, rl("cpu", "1"))
			p.Spec.Overhead = rl("cpu", "1500m")
			return p
		}(), alloc: alloc, maxPods: 110,
			reason: "OutOfcpu", message: "Pod was rejected: Node didn't have enough resource: cpu, requested: 2500, used: 0, capacity: 2000"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			before := tt.pod.DeepCopy()
			ok, reason, message := FitsNode(tt.pod, tt.admitted, tt.alloc, tt.maxPods)
			if ok != (tt.reason == "") || reason != tt.reason || message != tt.message {
				t.Errorf("FitsNode = %v, %q, %q\nwant %v, %q, %q", ok, reason, message, tt.reason == "", tt.reason, tt.message)
			}
			if d := cmp.Diff(before, tt.pod); d != "" {
				t.Errorf("FitsNode changed the pod:\n%s", d)
			}
		})
	}
	if limitsOnly.Spec.Containers[0].Resources.Requests != nil {
		t.Errorf("FitsNode changed an admitted pod's requests")
	}
}

// Probes, lifecycle hooks, readiness gates and the active deadline are
// supported (pods/prober, the worker's deadline).
func TestProbesHooksGatesDeadlineSupported(t *testing.T) {
	pod := supportedPod()
	pod.Spec.ActiveDeadlineSeconds = utilptr.To[int64](10)
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "x"}}
	c := &pod.Spec.Containers[1]
	h := v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}
	c.LivenessProbe, c.ReadinessProbe, c.StartupProbe = &v1.Probe{ProbeHandler: h}, &v1.Probe{ProbeHandler: h}, &v1.Probe{ProbeHandler: h}
	c.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 1}}}
	if got := Unsupported(pod); got != nil {
		t.Errorf("Unsupported = %q, want nil", got)
	}
}

// Pod-level resources: cpu and memory are supported, and the node-fit
// check counts the pod-level requests instead of the containers' sum.
func TestPodLevelResources(t *testing.T) {
	p := supportedPod()
	p.Spec.Resources = &v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m"), v1.ResourceMemory: resource.MustParse("1Gi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi")},
	}
	if bad := Unsupported(p); len(bad) > 0 {
		t.Errorf("Unsupported = %v, want none", bad)
	}
	small := podWith("small", nil, v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")})
	small.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")}}
	other := podWith("other", nil, v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")})
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi"), v1.ResourcePods: resource.MustParse("10")}
	ok, reason, msg := FitsNode(small, []*v1.Pod{other}, alloc, 10)
	if ok || reason != "OutOfcpu" {
		t.Errorf("FitsNode = %v %q %q, want OutOfcpu (1500m at pod level + 1 > 2)", ok, reason, msg)
	}
	if ok, reason, msg := FitsNode(small, nil, alloc, 10); !ok {
		t.Errorf("FitsNode alone = %q %q, want it to fit", reason, msg)
	}
}

// The in-tree sources kubelet 1.34 mounts through CSI migration are
// accepted (package csi translates them); the other in-tree ones are not.
func TestMigratedInTreeSourcesAccepted(t *testing.T) {
	for _, src := range []v1.VolumeSource{
		{GCEPersistentDisk: &v1.GCEPersistentDiskVolumeSource{PDName: "d"}},
		{AWSElasticBlockStore: &v1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-1"}},
		{AzureDisk: &v1.AzureDiskVolumeSource{DiskName: "d", DataDiskURI: "u"}},
		{AzureFile: &v1.AzureFileVolumeSource{SecretName: "s", ShareName: "sh"}},
		{VsphereVolume: &v1.VsphereVirtualDiskVolumeSource{VolumePath: "p"}},
		{Cinder: &v1.CinderVolumeSource{VolumeID: "c"}},
		{PortworxVolume: &v1.PortworxVolumeSource{VolumeID: "p"}},
	} {
		pod := supportedPod()
		pod.Spec.Volumes[1].VolumeSource = src
		if u := Unsupported(pod); len(u) != 0 {
			t.Errorf("%+v: refused %v", src, u)
		}
	}
	pod := supportedPod()
	pod.Spec.Volumes[1].VolumeSource = v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}}
	if u := Unsupported(pod); !slices.Equal(u, []string{"spec.volumes[1].nfs"}) {
		t.Errorf("nfs: %v, want it refused", u)
	}
}
