package containerspec

import (
	"errors"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilptr "k8s.io/utils/ptr"
)

func envPod(c v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"x.io/y": "z"}},
		Spec: v1.PodSpec{NodeName: "node-1", ServiceAccountName: "sa", Containers: []v1.Container{c}},
	}
}

func fromCM(name, key string, optional bool) *v1.EnvVarSource {
	return &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key, Optional: utilptr.To(optional)}}
}

func fromSecret(name, key string, optional bool) *v1.EnvVarSource {
	return &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key, Optional: utilptr.To(optional)}}
}

func fieldRef(p string) *v1.EnvVarSource {
	return &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: p}}
}

func resRef(r, container, divisor string) *v1.EnvVarSource {
	s := &v1.ResourceFieldSelector{Resource: r, ContainerName: container}
	if divisor != "" {
		s.Divisor = resource.MustParse(divisor)
	}
	return &v1.EnvVarSource{ResourceFieldRef: s}
}

func testInputs() Env {
	cms := map[string]*v1.ConfigMap{
		"cm": {Data: map[string]string{"A": "cm-a", "B": "cm-b"}},
	}
	secrets := map[string]*v1.Secret{
		"s": {Data: map[string][]byte{"A": []byte("s-a"), "pw": []byte("hunter2")}},
	}
	notFound := func(res, name string) error {
		return apierrors.NewNotFound(schema.GroupResource{Resource: res}, name)
	}
	return Env{
		NodeName: "node-1",
		HostIPs:  []string{"192.0.2.1", "2001:db8::1"},
		PodIPs:   []string{"10.0.0.5", "fd00::5"},
		Services: []*v1.Service{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"},
				Spec: v1.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []v1.ServicePort{{Name: "https", Port: 443, Protocol: v1.ProtocolTCP}}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "my-svc"},
				Spec: v1.ServiceSpec{ClusterIP: "10.96.0.9", Ports: []v1.ServicePort{{Port: 80}}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "far"},
				Spec: v1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []v1.ServicePort{{Port: 80}}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "headless"},
				Spec: v1.ServiceSpec{ClusterIP: v1.ClusterIPNone, Ports: []v1.ServicePort{{Port: 80}}}},
		},
		Allocatable: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"),
			v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		},
		ConfigMap: func(name string) (*v1.ConfigMap, error) {
			if cm, ok := cms[name]; ok {
				return cm, nil
			}
			return nil, notFound("configmap", name)
		},
		Secret: func(name string) (*v1.Secret, error) {
			if s, ok := secrets[name]; ok {
				return s, nil
			}
			return nil, notFound("secret", name)
		},
	}
}

// envMap indexes NAME=value entries by name.
func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func TestMakeEnv(t *testing.T) {
	serviceVars := []string{"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBERNETES_SERVICE_PORT_HTTPS",
		"KUBERNETES_PORT", "KUBERNETES_PORT_443_TCP", "KUBERNETES_PORT_443_TCP_ADDR", "KUBERNETES_PORT_443_TCP_PORT",
		"KUBERNETES_PORT_443_TCP_PROTO"}
	mySvcVars := []string{"MY_SVC_SERVICE_HOST", "MY_SVC_SERVICE_PORT", "MY_SVC_PORT", "MY_SVC_PORT_80_TCP",
		"MY_SVC_PORT_80_TCP_ADDR", "MY_SVC_PORT_80_TCP_PORT", "MY_SVC_PORT_80_TCP_PROTO"}
	tests := []struct {
		desc      string
		c         v1.Container
		links     *bool
		mutate    func(*Env)
		want      map[string]string // checked entries ("" value: must be absent when in absent)
		absent    []string
		wantFirst []string // the first variables, in order
		err       string
	}{
		{
			desc: "envFrom first, then env replaces, with prefixes",
			c: v1.Container{
				EnvFrom: []v1.EnvFromSource{
					{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}},
					{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "s"}}, Prefix: "S_"},
					{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "s"}}},
				},
				Env: []v1.EnvVar{{Name: "B", Value: "env-b"}, {Name: "C", Value: "$(A)-$(S_pw)"}},
			},
			want:      map[string]string{"A": "s-a", "B": "env-b", "S_A": "s-a", "S_pw": "hunter2", "pw": "hunter2", "C": "s-a-hunter2"},
			wantFirst: []string{"A=s-a", "B=env-b", "S_A=s-a", "S_pw=hunter2", "pw=hunter2", "C=s-a-hunter2"},
		},
		{
			desc: "valueFrom ConfigMap and Secret keys",
			c: v1.Container{Env: []v1.EnvVar{
				{Name: "X", ValueFrom: fromCM("cm", "A", false)},
				{Name: "Y", ValueFrom: fromSecret("s", "pw", false)},
				{Name: "Z", ValueFrom: fromCM("gone", "A", true)},
				{Name: "W", ValueFrom: fromCM("cm", "nokey", true)},
				{Name: "V", ValueFrom: fromSecret("s", "nokey", true)},
			}},
			want:   map[string]string{"X": "cm-a", "Y": "hunter2"},
			absent: []string{"Z", "W", "V"},
		},
		{
			desc: "optional envFrom that does not exist",
			c: v1.Container{EnvFrom: []v1.EnvFromSource{
				{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}, Optional: utilptr.To(true)}},
				{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}, Optional: utilptr.To(true)}},
			}},
			want: map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1"},
		},
		{desc: "missing ConfigMap", c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: fromCM("gone", "A", false)}}},
			err: `configmap "gone" not found`},
		{desc: "missing Secret from envFrom", c: v1.Container{EnvFrom: []v1.EnvFromSource{
			{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}}}}},
			err: `secret "gone" not found`},
		{desc: "missing ConfigMap key", c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: fromCM("cm", "k", false)}}},
			err: "couldn't find key k in ConfigMap ns/cm"},
		{desc: "missing Secret key", c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: fromSecret("s", "k", false)}}},
			err: "couldn't find key k in Secret ns/s"},
		{desc: "no API server", c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: fromCM("cm", "A", false)}}},
			mutate: func(in *Env) { in.ConfigMap = nil },
			err:    "couldn't get configMap ns/cm, no kubeClient defined"},
		{desc: "API error is returned", c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: fromSecret("s", "pw", true)}}},
			mutate: func(in *Env) {
				in.Secret = func(string) (*v1.Secret, error) { return nil, errors.New("connection refused") }
			},
			err: "connection refused"},
		{
			desc: "fieldRefs",
			c: v1.Container{Env: []v1.EnvVar{
				{Name: "NAME", ValueFrom: fieldRef("metadata.name")},
				{Name: "NS", ValueFrom: fieldRef("metadata.namespace")},
				{Name: "UID", ValueFrom: fieldRef("metadata.uid")},
				{Name: "APP", ValueFrom: fieldRef("metadata.labels['app']")},
				{Name: "ANN", ValueFrom: fieldRef("metadata.annotations['x.io/y']")},
				{Name: "NOLABEL", ValueFrom: fieldRef("metadata.labels['nope']")},
				{Name: "NODE", ValueFrom: fieldRef("spec.nodeName")},
				{Name: "SA", ValueFrom: fieldRef("spec.serviceAccountName")},
				{Name: "HOSTIP", ValueFrom: fieldRef("status.hostIP")},
				{Name: "HOSTIPS", ValueFrom: fieldRef("status.hostIPs")},
				{Name: "PODIP", ValueFrom: fieldRef("status.podIP")},
				{Name: "PODIPS", ValueFrom: fieldRef("status.podIPs")},
			}},
			want: map[string]string{"NAME": "p", "NS": "ns", "UID": "u1", "APP": "web", "ANN": "z", "NOLABEL": "",
				"NODE": "node-1", "SA": "sa", "HOSTIP": "192.0.2.1", "HOSTIPS": "192.0.2.1,2001:db8::1",
				"PODIP": "10.0.0.5", "PODIPS": "10.0.0.5,fd00::5"},
		},
		{desc: "unknown fieldRef", c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: fieldRef("spec.hostname")}}},
			err: "field label not supported: spec.hostname"},
		{
			desc: "resourceFieldRef with divisors; unset limits are the node's allocatable",
			c: v1.Container{
				Name: "c",
				Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("32Mi")},
					Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")},
				},
				Env: []v1.EnvVar{
					{Name: "CPU_LIMIT", ValueFrom: resRef("limits.cpu", "", "")},
					{Name: "CPU_LIMIT_M", ValueFrom: resRef("limits.cpu", "", "1m")},
					{Name: "CPU_REQUEST", ValueFrom: resRef("requests.cpu", "", "")},
					{Name: "CPU_REQUEST_M", ValueFrom: resRef("requests.cpu", "", "1m")},
					{Name: "MEM_LIMIT", ValueFrom: resRef("limits.memory", "", "")},
					{Name: "MEM_LIMIT_MI", ValueFrom: resRef("limits.memory", "", "1Mi")},
					{Name: "MEM_REQUEST_MI", ValueFrom: resRef("requests.memory", "c", "1Mi")},
					{Name: "EPH_LIMIT_GI", ValueFrom: resRef("limits.ephemeral-storage", "", "1Gi")},
					{Name: "EPH_REQUEST", ValueFrom: resRef("requests.ephemeral-storage", "", "")},
				},
			},
			want: map[string]string{"CPU_LIMIT": "4", "CPU_LIMIT_M": "4000", "CPU_REQUEST": "1", "CPU_REQUEST_M": "250",
				"MEM_LIMIT": "67108864", "MEM_LIMIT_MI": "64", "MEM_REQUEST_MI": "32", "EPH_LIMIT_GI": "100", "EPH_REQUEST": "0"},
		},
		{desc: "resourceFieldRef to another container", c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: resRef("limits.cpu", "other", "")}}},
			err: "container other not found"},
		{
			desc: "service links: the namespace's services and the master service; env wins; values expand service vars",
			c: v1.Container{Env: []v1.EnvVar{
				{Name: "MY_SVC_SERVICE_HOST", Value: "mine"},
				{Name: "URL", Value: "http://$(MY_SVC_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"},
			}},
			want: map[string]string{"MY_SVC_SERVICE_HOST": "mine", "URL": "http://mine:443", "MY_SVC_PORT": "tcp://10.96.0.9:80",
				"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_PORT_443_TCP": "tcp://10.96.0.1:443"},
			absent:    []string{"FAR_SERVICE_HOST", "HEADLESS_SERVICE_HOST"},
			wantFirst: []string{"MY_SVC_SERVICE_HOST=mine", "URL=http://mine:443"},
		},
		{
			desc:   "enableServiceLinks false keeps only the master service",
			c:      v1.Container{},
			links:  utilptr.To(false),
			want:   map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1"},
			absent: mySvcVars,
		},
		{
			desc:   "no Services known: no service variables",
			c:      v1.Container{},
			mutate: func(in *Env) { in.Services = nil },
			absent: append(slices.Clone(serviceVars), mySvcVars...),
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			pod := envPod(tt.c)
			pod.Spec.EnableServiceLinks = tt.links
			in := testInputs()
			if tt.mutate != nil {
				tt.mutate(&in)
			}
			env, err := makeEnv(pod, &pod.Spec.Containers[0], in)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := envMap(env)
			if len(got) != len(env) {
				t.Errorf("duplicate names in %q", env)
			}
			for k, v := range tt.want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("%s = %q (set %v), want %q", k, g, ok, v)
				}
			}
			for _, k := range tt.absent {
				if _, ok := got[k]; ok {
					t.Errorf("%s is set, want absent", k)
				}
			}
			if tt.wantFirst != nil && !slices.Equal(env[:len(tt.wantFirst)], tt.wantFirst) {
				t.Errorf("env starts %q, want %q", env[:len(tt.wantFirst)], tt.wantFirst)
			}
			if tt.mutate == nil && tt.links == nil {
				for _, k := range append(slices.Clone(serviceVars), mySvcVars...) {
					if _, ok := got[k]; !ok && k != "MY_SVC_SERVICE_HOST" {
						t.Errorf("service variable %s missing", k)
					}
				}
			}
		})
	}
}
