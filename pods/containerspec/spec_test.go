package containerspec

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/runtime"
)

type fakeCgroups struct{ err error }

func (f fakeCgroups) EnsurePod(pod *v1.Pod) (string, error) {
	if f.err != nil {
		return "", f.err
	}
	return "/kubepods/burstable/pod" + string(pod.UID), nil
}

func (fakeCgroups) OOMScoreAdj(_ *v1.Pod, c *v1.Container) int { return len(c.Name) * 100 }
func (fakeCgroups) SwapMax(_ *v1.Pod, c *v1.Container) *int64 {
	n := int64(len(c.Name))
	return &n
}

type fakeImages map[string]string

func (f fakeImages) ImageUser(_ context.Context, ref string) (string, error) {
	u, ok := f[ref]
	if !ok {
		return "", errors.New("image " + ref + " not found")
	}
	return u, nil
}

// TestBuild drives the one entry point through what each input changes
// in the runtime's spec: env precedence and expansion, mounts (subPath,
// name-service files, termination message), security, resources and
// cgroups, stdio, network and the pod's namespaces, the runtime type.
func TestBuild(t *testing.T) {
	base := func() (*v1.Pod, *v1.Container) {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1"},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "img:1"}}},
		}
		return pod, &pod.Spec.Containers[0]
	}
	tests := []struct {
		desc   string
		mutate func(pod *v1.Pod, c *v1.Container, in *Inputs)
		// check inspects the spec (podDir is the inputs' PodDir).
		check   func(t *testing.T, s runtime.ContainerSpec, podDir string)
		wantErr string
	}{
		{
			desc: "defaults: identity, log path, labels, netns, kubelet's minimal resources and security",
			check: func(t *testing.T, s runtime.ContainerSpec, podDir string) {
				want := runtime.ContainerSpec{
					Pod:       runtime.PodRef{UID: "u1", Name: "web", Namespace: "ns"},
					Name:      "app",
					Attempt:   3,
					Image:     "img:1",
					Env:       []string{},
					Mounts:    []runtime.Mount{},
					Resources: runtime.Resources{CPUShares: 2},
					LogPath:   "/logs/app/3.log",
					NetNSPath: "/netns/u1",
					Labels:    map[string]string{"hash": "h1"},
					Security:  runtime.Security{Seccomp: runtime.SeccompUnconfined},
				}
				if diff := cmp.Diff(want, s, cmp.Comparer(func(a, b []runtime.Mount) bool { return len(a) == len(b) && (len(a) == 0 || slices.Equal(a, b)) }),
					cmp.Comparer(func(a, b []string) bool { return len(a) == len(b) && (len(a) == 0 || slices.Equal(a, b)) })); diff != "" {
					t.Errorf("spec (-want +got):\n%s", diff)
				}
			},
		},
		{
			desc: "env: envFrom first, env replaces it in order, $(VAR) over what is set so far, command and args expanded",
			mutate: func(pod *v1.Pod, c *v1.Container, in *Inputs) {
				in.Env.ConfigMap = func(name string) (*v1.ConfigMap, error) {
					return &v1.ConfigMap{Data: map[string]string{"A": "from-cm", "B": "b"}}, nil
				}
				c.EnvFrom = []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}}
				c.Env = []v1.EnvVar{{Name: "A", Value: "own-$(B)"}, {Name: "C", Value: "$(A)/$(LATER)"}, {Name: "LATER", Value: "l"},
					{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
				c.Command = []string{"/bin/$(POD)", "$$(A)"}
				c.Args = []string{"$(C)", "$(NOPE)"}
			},
			check: func(t *testing.T, s runtime.ContainerSpec, _ string) {
				wantEnv := []string{"A=own-b", "B=b", "C=own-b/$(LATER)", "LATER=l", "POD=web"}
				if !slices.Equal(s.Env, wantEnv) {
					t.Errorf("env %q, want %q", s.Env, wantEnv)
				}
				if want := []string{"/bin/web", "$(A)"}; !slices.Equal(s.Command, want) {
					t.Errorf("command %q, want %q", s.Command, want)
				}
				if want := []string{"own-b/$(LATER)", "$(NOPE)"}; !slices.Equal(s.Args, want) {
					t.Errorf("args %q, want %q", s.Args, want)
				}
			},
		},
		{
			desc: "env: a required ConfigMap key that is missing is kubelet's error",
			mutate: func(pod *v1.Pod, c *v1.Container, in *Inputs) {
				in.Env.ConfigMap = func(string) (*v1.ConfigMap, error) { return &v1.ConfigMap{}, nil }
				c.Env = []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
					LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Key: "k"}}}}
			},
			wantErr: "couldn't find key k in ConfigMap ns/cm",
		},
		{
			desc: "env: service-link variables after the container's own, which win",
			mutate: func(pod *v1.Pod, c *v1.Container, in *Inputs) {
				in.Env.Services = []*v1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
					Spec: v1.ServiceSpec{ClusterIP: "10.96.0.7", Ports: []v1.ServicePort{{Port: 5432, Protocol: v1.ProtocolTCP}}}}}
				c.Env = []v1.EnvVar{{Name: "DB_SERVICE_HOST", Value: "mine"}, {Name: "URL", Value: "$(DB_SERVICE_PORT)"}}
			},
			check: func(t *testing.T, s runtime.ContainerSpec, _ string) {
				if len(s.Env) < 2 || s.Env[0] != "DB_SERVICE_HOST=mine" || s.Env[1] != "URL=5432" {
					t.Errorf("env %q, want the container's first, with service variables expanded", s.Env)
				}
				if slices.Contains(s.Env, "DB_SERVICE_HOST=10.96.0.7") || !slices.Contains(s.Env, "DB_PORT=tcp://10.96.0.7:5432") {
					t.Errorf("env %q: want the service variables the container does not set", s.Env)
				}
			},
		},
		{
			desc: "subPathExpr is expanded with the environment (an expanded '..' is refused)",
			mutate: func(pod *v1.Pod, c *v1.Container, in *Inputs) {
				c.Env = []v1.EnvVar{{Name: "DIR", Value: "../up"}}
				c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data", SubPathExpr: "$(DIR)"}}
				in.Volumes = map[string]string{"data": "/vol/data"}
			},
			wantErr: "container \"app\": volumeMount \"data\": unable to provision SubPath `../up`: must not contain '..'",
		},
		{
			desc: "subPathExpr naming a variable without a value",
			mutate: func(pod *v1.Pod, c *v1.Container, in *Inputs) {
				c.Env = []v1.EnvVar{{Name: "EMPTY"}}
				c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data", SubPathExpr: "$(EMPTY)/$(NOPE)"}}
				in.Volumes = map[string]string{"data": "/vol/data"}
			},
			wantErr: `container "app": volumeMount "data": subPathExpr "$(EMPTY)/$(NOPE)": missing value for EMPTY, NOPE`,
		},
		{
			desc: "volume mounts without subPath, then the name-service files except where the container mounts a volume",
			mutate: func(pod *v1.Pod, c *v1.Container, in *Inputs) {
				c.VolumeMounts = []v1.VolumeMount{{Name: "hosts", MountPath: "/etc/hosts/", ReadOnly: true}}
				in.Volumes = map[string]string{"hosts": "/vol/hosts"}
				in.NameFiles = true
			},
			check: func(t *testing.T, s runtime.ContainerSpec, podDir string) {
				want := []runtime.Mount{
					{HostPath: "/vol/hosts", ContainerPath: "/etc/hosts/", ReadOnly: true},
					{HostPath: filepath.Join(podDir, ResolvConfFile), ContainerPath: "/etc/resolv.conf"},
					{HostPath: filepath.Join(podDir, HostnameFile), ContainerPath: "/etc/hostname"},
				}
				if diff := cmp.Diff(want, s.Mounts); diff != "" {
					t.Errorf("mounts (-want +got):\n%s", diff)
				}
			},
		},
		{
			desc: "name-service files not written yet: no mounts of them",
			mutate: func(pod *v1.Pod, c *v1.Container, in *Inputs) {
				in.Hostname = "web"
			},
			check: func(t *testing.T, s runtime.ContainerSpec, _ string) {
				if len(s.Mounts) != 0 || s.Hostname != "web" {
					t.Errorf("mounts %v, hostname %q; want none and web", s.Mounts, s.Hostname)
				}
			},
		},
		{
			desc: "termination message: a fresh world-writable file, mounted and labelled",
			mutate: func(pod *v1.Pod, c *v1.Container, in *Inputs) {
				c.TerminationMessagePath = "dev/termination-log"
			},
			check: func(t *testing.T, s runtime.ContainerSpec, podDir string) {
				host := s.Labels[LabelTerminationMessagePath]
				if filepath.Dir(host) != filepath.Join(podDir, "containers", "app") || s.Labels["hash"] != "h1" {
					t.Fatalf("labels %v, want the message file under the pod's containers/app and the hash", s.Labels)
				}
				if want := (runtime.Mount{HostPath: host, ContainerPath: "/dev/termination-log"}); len(s.Mounts) != 1 || s.Mounts[0] != want {
					t.Errorf("mounts %v, want %v", s.Mounts, want)
				}
				if fi, err := os.Stat(host); err != nil || fi.Size() != 0 || fi.Mode().Perm() != 0o666 {
					t.Errorf("message file %v, %v; want empty and rw-rw-rw-", fi, err)
				}
			},
		},
		{
			desc: "resources: cpu request to shares, cpu limit to a CFS quota, memory limit",
			mutate: func(pod *v1.Pod, c *v1.Container, in *Inputs) {
				c.Resources = v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
					Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("64Mi")},
				}
			},
			check: func(t *testing.T, s runtime.ContainerSpec, _ string) {
				want := runtime.Resources{CPUShares: 256, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimitBytes: 64 << 20}
				if s.Resources != want {
					t.Errorf("resources %+v, want %+v", s.Resources, want)
				}
			},
		},
		{
			desc: "resources: a cpu limit alone is the request too; a tiny limit gets the 1ms minimum quota",
			mutate: func(pod *v1.Pod, c *v1.Container, in *Inputs) {
				c.Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1m")}
			},
			check: func(t *testing.T, s runtime.ContainerSpec, _ string) {
				want := runtime.Resources{CPUShares: 2, CPUQuota: 1000, CPUPeriod: 100000}
				if s.Resources != want {
					t.Errorf("resources %+v, want %+v", s.Resources, want)
				}
			},
		},
		{
			desc: "cgroups: the pod's cgroup parent, the container's OOM score and swap limit",
			mutate: func(pod *v1.Pod, c *v1.Container, in *Inputs) {
				in.Cgroups = fakeCgroups{}
			},
			check: func(t *testing.T, s runtime.ContainerSpec, _ string) {
				if s.CgroupParent != "/kubepods/burstable/podu1" || s.OOMScoreAdj == nil || *s.OOMScoreAdj != 300 {
					t.Errorf("cgroup parent %q, oom_score_adj %v", s.CgroupParent, s.OOMScoreAdj)
				}
				if s.Resources.SwapMax == nil || *s.Resources.SwapMax != 3 {
					t.Errorf("swap limit %v, want the cgroup manager's (3)", s.Resources.SwapMax)
				}
			},
		},
		{
			desc: "cgroups: a pod cgroup that cannot be made",
			mutate: func(pod *v1.Pod, c *v1.Container, in *Inputs) {
				in.Cgroups = fakeCgroups{err: errors.New("read-only file system")}
			},
			wantErr: "pod cgroup: read-only file system",
		},
		{
			desc: "stdin and tty: FIFOs in the pod's stdio directory",
			mutate: func(pod *v1.Pod, c *v1.Container, in *Inputs) {
				c.Stdin, c.StdinOnce, c.TTY = true, true, true
			},
			check: func(t *testing.T, s runtime.ContainerSpec, podDir string) {
				if !s.Stdin || !s.StdinOnce || !s.TTY || s.StdioDir != filepath.Join(podDir, "stdio") {
					t.Errorf("stdin %v once %v tty %v dir %q", s.Stdin, s.StdinOnce, s.TTY, s.StdioDir)
				}
			},
		},
		{
			desc: "tty alone needs the stdio directory too",
			mutate: func(pod *v1.Pod, c *v1.Container, in *Inputs) {
				c.TTY = true
			},
			check: func(t *testing.T, s runtime.ContainerSpec, podDir string) {
				if s.Stdin || !s.TTY || s.StdioDir != filepath.Join(podDir, "stdio") {
					t.Errorf("stdin %v tty %v dir %q", s.Stdin, s.TTY, s.StdioDir)
				}
			},
		},
		{
			desc: "hostNetwork: no network namespace",
			mutate: func(pod *v1.Pod, c *v1.Container, in *Inputs) {
				pod.Spec.HostNetwork = true
			},
			check: func(t *testing.T, s runtime.ContainerSpec, _ string) {
				if !s.HostNetwork || s.NetNSPath != "" {
					t.Errorf("hostNetwork %v netns %q", s.HostNetwork, s.NetNSPath)
				}
			},
		},
		{
			desc: "runtime class: the resolved runtime type",
			mutate: func(pod *v1.Pod, c *v1.Container, in *Inputs) {
				in.RuntimeType = "io.containerd.kata.v2"
			},
			check: func(t *testing.T, s runtime.ContainerSpec, _ string) {
				if s.RuntimeType != "io.containerd.kata.v2" {
					t.Errorf("runtime type %q", s.RuntimeType)
				}
			},
		},
		{
			desc: "security: the pod's context under the container's, seccompDefault, the shared PID namespace",
			mutate: func(pod *v1.Pod, c *v1.Container, in *Inputs) {
				pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: utilptr.To[int64](1000), RunAsGroup: utilptr.To[int64](3000), FSGroup: utilptr.To[int64](2000)}
				c.SecurityContext = &v1.SecurityContext{RunAsUser: utilptr.To[int64](1001), AllowPrivilegeEscalation: utilptr.To(false),
					Capabilities: &v1.Capabilities{Drop: []v1.Capability{"ALL"}, Add: []v1.Capability{"NET_BIND_SERVICE"}}}
				in.Security = SecurityOptions{SeccompDefault: true}
				in.PodNamespaces = runtime.PodNamespaces{IPCPath: "/ns/ipc", UTSPath: "/ns/uts", ShmPath: "/ns/shm"}
				in.PIDNSPath = "/proc/42/ns/pid"
			},
			check: func(t *testing.T, s runtime.ContainerSpec, _ string) {
				want := runtime.Security{RunAsUser: utilptr.To[int64](1001), RunAsGroup: utilptr.To[int64](3000), NoNewPrivileges: true,
					CapAdd: []string{"NET_BIND_SERVICE"}, CapDrop: []string{"ALL"}, SupplementalGroups: []int64{2000},
					Seccomp: runtime.SeccompRuntimeDefault, PIDNSPath: "/proc/42/ns/pid"}
				if diff := cmp.Diff(want, s.Security); diff != "" {
					t.Errorf("security (-want +got):\n%s", diff)
				}
				if s.PodNamespaces.IPCPath != "/ns/ipc" || s.PodNamespaces.UTSPath != "/ns/uts" || s.PodNamespaces.ShmPath != "/ns/shm" {
					t.Errorf("pod namespaces %+v", s.PodNamespaces)
				}
			},
		},
		{
			desc: "security: runAsNonRoot with an image that runs as root",
			mutate: func(pod *v1.Pod, c *v1.Container, in *Inputs) {
				pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: utilptr.To(true)}
				in.Images = fakeImages{"img:1": "0:0"}
			},
			wantErr: `container has runAsNonRoot and image will run as root (pod: "web_ns(u1)", container: app)`,
		},
		{
			desc: "security: runAsNonRoot with an image that runs as a numeric user",
			mutate: func(pod *v1.Pod, c *v1.Container, in *Inputs) {
				pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: utilptr.To(true)}
				in.Images = fakeImages{"img:1": "1000"}
			},
			check: func(t *testing.T, s runtime.ContainerSpec, _ string) {
				if s.Security.RunAsUser != nil {
					t.Errorf("runAsUser %v, want the image's own", *s.Security.RunAsUser)
				}
			},
		},
		{
			desc: "security: runAsNonRoot with no way to read the image's user",
			mutate: func(pod *v1.Pod, c *v1.Container, in *Inputs) {
				pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: utilptr.To(true)}
			},
			wantErr: "cannot read the image's user to verify runAsNonRoot",
		},
		{
			desc: "security: runAsUser 0 breaks runAsNonRoot without asking the image",
			mutate: func(pod *v1.Pod, c *v1.Container, in *Inputs) {
				c.SecurityContext = &v1.SecurityContext{RunAsNonRoot: utilptr.To(true), RunAsUser: utilptr.To[int64](0)}
			},
			wantErr: `container's runAsUser breaks non-root policy (pod: "web_ns(u1)", container: app)`,
		},
		{
			desc: "security: a Localhost seccomp profile under the node's profile root",
			mutate: func(pod *v1.Pod, c *v1.Container, in *Inputs) {
				c.SecurityContext = &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: utilptr.To("p.json")}}
				in.Security = SecurityOptions{SeccompProfileRoot: "/var/lib/nodeagent/seccomp"}
			},
			check: func(t *testing.T, s runtime.ContainerSpec, _ string) {
				if s.Security.Seccomp != runtime.SeccompLocalhost || s.Security.SeccompProfilePath != "/var/lib/nodeagent/seccomp/p.json" {
					t.Errorf("seccomp %v %q", s.Security.Seccomp, s.Security.SeccompProfilePath)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			pod, c := base()
			in := Inputs{
				Attempt:   3,
				PodDir:    t.TempDir(),
				LogPath:   "/logs/app/3.log",
				Labels:    map[string]string{"hash": "h1"},
				NetNSPath: "/netns/u1",
			}
			if tt.mutate != nil {
				tt.mutate(pod, c, &in)
			}
			s, err := Build(context.Background(), pod, c, in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.check != nil {
				tt.check(t, s, in.PodDir)
			}
		})
	}
}

// Build copies the labels it is given: the spec's own labels (the
// termination-message file) do not leak into the caller's map.
func TestBuildKeepsInputLabels(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}}
	c := &v1.Container{Name: "c", TerminationMessagePath: "/dev/termination-log"}
	labels := map[string]string{"hash": "h"}
	s, err := Build(context.Background(), pod, c, Inputs{PodDir: t.TempDir(), Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	if len(labels) != 1 || !strings.HasPrefix(s.Labels[LabelTerminationMessagePath], "/") {
		t.Errorf("input labels %v, spec labels %v", labels, s.Labels)
	}
}

// Device plugins' allocations go into the spec as kubelet orders them:
// their envs before the container's own, their mounts before the volumes'.
// The CPU manager's cpuset is the container's; a container with
// exclusive CPUs has no CFS quota (DisableCPUQuotaWithExclusiveCPUs).
func TestBuildCPUSet(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}}
	l := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("64Mi")}
	c := &v1.Container{Name: "c", Resources: v1.ResourceRequirements{Requests: l, Limits: l}}
	s, err := Build(context.Background(), pod, c, Inputs{PodDir: t.TempDir(), CPUSet: "0-1"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Resources.CPUSetCPUs != "0-1" || s.Resources.CPUQuota != 100000 {
		t.Errorf("shared: cpuset %q quota %d", s.Resources.CPUSetCPUs, s.Resources.CPUQuota)
	}
	s, err = Build(context.Background(), pod, c, Inputs{PodDir: t.TempDir(), CPUSet: "1", Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.Resources.CPUSetCPUs != "1" || s.Resources.CPUQuota != 0 || s.Resources.CPUShares != 1024 {
		t.Errorf("exclusive: cpuset %q quota %d shares %d", s.Resources.CPUSetCPUs, s.Resources.CPUQuota, s.Resources.CPUShares)
	}
	// cpuCFSQuota false: no quota, whatever the limit; the rest stays.
	s, err = Build(context.Background(), pod, c, Inputs{PodDir: t.TempDir(), CPUSet: "0-1", NoCPUQuota: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.Resources.CPUSetCPUs != "0-1" || s.Resources.CPUQuota != 0 || s.Resources.CPUPeriod != 0 || s.Resources.CPUShares != 1024 || s.Resources.MemoryLimitBytes != 64<<20 {
		t.Errorf("no CFS quota: %+v", s.Resources)
	}
}

func TestBuildDevices(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}}
	c := &v1.Container{Name: "c", Env: []v1.EnvVar{{Name: "A", Value: "mine"}}}
	dev := Devices{
		Devices:     []runtime.Device{{HostPath: "/dev/null", ContainerPath: "/dev/dev0", Permissions: "rw"}},
		Mounts:      []runtime.Mount{{HostPath: "/tmp/Dev-1", ContainerPath: "/tmp/Dev-1"}},
		Env:         []string{"A=plugin", "DEV=Dev-1"},
		Annotations: map[string]string{"example.com/dev": "Dev-1"},
		CDIDevices:  []string{"example.com/resource=Dev-1"},
	}
	s, err := Build(context.Background(), pod, c, Inputs{PodDir: t.TempDir(), Devices: dev})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Env[:3], []string{"A=plugin", "DEV=Dev-1", "A=mine"}) {
		t.Errorf("env %v, want the plugin's first", s.Env)
	}
	if len(s.Mounts) == 0 || s.Mounts[0] != dev.Mounts[0] {
		t.Errorf("mounts %v, want the plugin's first", s.Mounts)
	}
	if !slices.Equal(s.Devices, dev.Devices) || !maps.Equal(s.Annotations, dev.Annotations) || !slices.Equal(s.CDIDevices, dev.CDIDevices) {
		t.Errorf("devices %v annotations %v CDI %v", s.Devices, s.Annotations, s.CDIDevices)
	}
}

// volumeDevices as kubelet's makeBlockVolumes passes them: the device
// behind the volume's symlink (resolved, as containerd's CRI resolves a
// device's host path) at devicePath, "mrw", "r" for a read-only claim;
// a volume that is no symlink, or a relative devicePath, is refused with
// kubelet's message.
func TestBuildVolumeDevices(t *testing.T) {
	dir := t.TempDir()
	dev := filepath.Join(dir, "publish-file")
	if err := os.WriteFile(dev, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "volumeDevices", "kubernetes.io~csi", "pv-1")
	if err := os.MkdirAll(filepath.Dir(link), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dev, link); err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
		Spec: v1.PodSpec{Volumes: []v1.Volume{
			{Name: "rw", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "a"}}},
			{Name: "ro", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "a", ReadOnly: true}}},
			{Name: "dir", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		}}}
	vols := map[string]string{"rw": link, "ro": link, "dir": dir}
	c := &v1.Container{Name: "c", VolumeDevices: []v1.VolumeDevice{{Name: "rw", DevicePath: "/dev/xvda"}, {Name: "ro", DevicePath: "/dev/xvdb"}}}
	s, err := Build(context.Background(), pod, c, Inputs{PodDir: t.TempDir(), Volumes: vols})
	if err != nil {
		t.Fatal(err)
	}
	want := []runtime.Device{{HostPath: dev, ContainerPath: "/dev/xvda", Permissions: "mrw"}, {HostPath: dev, ContainerPath: "/dev/xvdb", Permissions: "r"}}
	if !slices.Equal(s.Devices, want) {
		t.Errorf("devices %v, want %v", s.Devices, want)
	}
	for _, tc := range []struct {
		dev  v1.VolumeDevice
		want string
	}{
		{v1.VolumeDevice{Name: "rw", DevicePath: "dev/xvda"}, "error DevicePath `dev/xvda` must be an absolute path"},
		{v1.VolumeDevice{Name: "dir", DevicePath: "/dev/xvda"}, `cannot find volume "dir" to pass into container "c"`},
		{v1.VolumeDevice{Name: "absent", DevicePath: "/dev/xvda"}, `cannot find volume "absent" to pass into container "c"`},
	} {
		c := &v1.Container{Name: "c", VolumeDevices: []v1.VolumeDevice{tc.dev}}
		if _, err := Build(context.Background(), pod, c, Inputs{PodDir: t.TempDir(), Volumes: vols}); err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v, want %s", tc.dev, err, tc.want)
		}
	}
}
