package containerspec

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/runtime"
)

func TestContainerSecurity(t *testing.T) {
	opts := SecurityOptions{SeccompProfileRoot: "/var/lib/nodeagent/seccomp"}
	tests := []struct {
		name    string
		pod     *v1.PodSecurityContext
		hostPID bool
		hostIPC bool
		c       *v1.SecurityContext
		opts    *SecurityOptions
		want    runtime.Security
		wantErr string
	}{
		{name: "nothing set: unconfined, escalation allowed", want: runtime.Security{Seccomp: runtime.SeccompUnconfined}},
		{name: "seccompDefault", opts: &SecurityOptions{SeccompDefault: true},
			want: runtime.Security{Seccomp: runtime.SeccompRuntimeDefault}},
		{
			name: "restricted profile from the pod and the container",
			pod: &v1.PodSecurityContext{
				RunAsNonRoot: utilptr.To(true), RunAsUser: utilptr.To[int64](1000), RunAsGroup: utilptr.To[int64](3000),
				FSGroup: utilptr.To[int64](2000), SupplementalGroups: []int64{4000, 5000},
				SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault},
			},
			c: &v1.SecurityContext{
				AllowPrivilegeEscalation: utilptr.To(false),
				Capabilities:             &v1.Capabilities{Drop: []v1.Capability{"ALL"}, Add: []v1.Capability{"NET_BIND_SERVICE"}},
			},
			want: runtime.Security{
				RunAsUser: utilptr.To[int64](1000), RunAsGroup: utilptr.To[int64](3000),
				SupplementalGroups: []int64{2000, 4000, 5000}, NoNewPrivileges: true,
				CapAdd: []string{"NET_BIND_SERVICE"}, CapDrop: []string{"ALL"}, Seccomp: runtime.SeccompRuntimeDefault,
			},
		},
		{
			name: "container fields win over the pod's",
			pod: &v1.PodSecurityContext{
				RunAsUser: utilptr.To[int64](1000), RunAsGroup: utilptr.To[int64](1000),
				SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault},
			},
			c: &v1.SecurityContext{
				RunAsUser: utilptr.To[int64](0), SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined},
				AllowPrivilegeEscalation: utilptr.To(true),
			},
			want: runtime.Security{RunAsUser: utilptr.To[int64](0), RunAsGroup: utilptr.To[int64](1000), Seccomp: runtime.SeccompUnconfined},
		},
		{
			name: "localhost seccomp is under the profile root",
			c:    &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: utilptr.To("audit.json")}},
			want: runtime.Security{Seccomp: runtime.SeccompLocalhost, SeccompProfilePath: "/var/lib/nodeagent/seccomp/audit.json"},
		},
		{
			name:    "localhost seccomp without a profile",
			pod:     &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost}},
			wantErr: "localhostProfile must be set if seccompProfile type is Localhost.",
		},
		{
			name:    "privileged, read-only rootfs, host namespaces, strict groups, sysctls",
			hostPID: true, hostIPC: true,
			pod: &v1.PodSecurityContext{
				SupplementalGroupsPolicy: utilptr.To(v1.SupplementalGroupsPolicyStrict),
				Sysctls:                  []v1.Sysctl{{Name: "net/ipv4/ip_local_port_range", Value: "1024 2048"}, {Name: "kernel.shm_rmid_forced", Value: "1"}},
			},
			c: &v1.SecurityContext{Privileged: utilptr.To(true), ReadOnlyRootFilesystem: utilptr.To(true), ProcMount: utilptr.To(v1.DefaultProcMount)},
			want: runtime.Security{
				Privileged: true, ReadOnlyRootfs: true, HostPID: true, HostIPC: true, StrictGroups: true,
				Sysctls: map[string]string{"net.ipv4.ip_local_port_range": "1024 2048", "kernel.shm_rmid_forced": "1"},
				Seccomp: runtime.SeccompUnconfined,
			},
		},
		{
			name: "apparmor",
			pod:  &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}},
			c:    &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: utilptr.To("k8s-deny-write")}},
			want: runtime.Security{Seccomp: runtime.SeccompUnconfined, AppArmorProfile: "k8s-deny-write"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{SecurityContext: tt.pod, HostPID: tt.hostPID, HostIPC: tt.hostIPC,
				Containers: []v1.Container{{Name: "c", SecurityContext: tt.c}}}}
			o := opts
			if tt.opts != nil {
				o = *tt.opts
			}
			got, err := containerSecurity(pod, &pod.Spec.Containers[0], o)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("containerSecurity error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("containerSecurity (-want +got):\n%s", d)
			}
		})
	}
}

func TestVerifyRunAsNonRoot(t *testing.T) {
	pod := func(podSC *v1.PodSecurityContext, sc *v1.SecurityContext) *v1.Pod {
		p := &v1.Pod{Spec: v1.PodSpec{SecurityContext: podSC, Containers: []v1.Container{{Name: "app", SecurityContext: sc}}}}
		p.Name, p.Namespace, p.UID = "web", "default", "1234"
		return p
	}
	nonRoot := &v1.PodSecurityContext{RunAsNonRoot: utilptr.To(true)}
	tests := []struct {
		name      string
		pod       *v1.Pod
		imageUser string
		needImage bool
		want      string
	}{
		{name: "not asked", pod: pod(nil, nil), imageUser: "0"},
		{name: "runAsNonRoot false", pod: pod(&v1.PodSecurityContext{RunAsNonRoot: utilptr.To(false)}, nil), imageUser: ""},
		{name: "runAsUser non-zero", pod: pod(nonRoot, &v1.SecurityContext{RunAsUser: utilptr.To[int64](1000)})},
		{name: "runAsUser 0", pod: pod(nonRoot, &v1.SecurityContext{RunAsUser: utilptr.To[int64](0)}),
			want: `container's runAsUser breaks non-root policy (pod: "web_default(1234)", container: app)`},
		{name: "image without user runs as root", pod: pod(nonRoot, nil), needImage: true,
			want: `container has runAsNonRoot and image will run as root (pod: "web_default(1234)", container: app)`},
		{name: "image user 0:0", pod: pod(nonRoot, nil), imageUser: "0:0", needImage: true,
			want: `container has runAsNonRoot and image will run as root (pod: "web_default(1234)", container: app)`},
		{name: "image user numeric", pod: pod(nonRoot, nil), imageUser: "1234:55", needImage: true},
		{name: "image user by name", pod: pod(nil, &v1.SecurityContext{RunAsNonRoot: utilptr.To(true)}), imageUser: "nobody", needImage: true,
			want: `container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root (pod: "web_default(1234)", container: app)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &tt.pod.Spec.Containers[0]
			if got := needsImageUser(tt.pod, c); got != tt.needImage {
				t.Errorf("needsImageUser = %v, want %v", got, tt.needImage)
			}
			err := verifyRunAsNonRoot(tt.pod, c, tt.imageUser)
			if got := errString(err); got != tt.want {
				t.Errorf("verifyRunAsNonRoot =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestRuntimeTypeFor(t *testing.T) {
	handlers := map[string]string{"runc": "io.containerd.runc.v2", "test-handler": "io.containerd.runc.v2", "kata": "io.containerd.kata.v2"}
	lookup := func(_ context.Context, name string) (string, error) {
		switch name {
		case "fast":
			return "kata", nil
		case "test":
			return "test-handler", nil
		case "odd":
			return "gvisor", nil
		}
		return "", fmt.Errorf("RuntimeClass %q not found", name)
	}
	tests := []struct {
		class   *string
		lookup  func(context.Context, string) (string, error)
		want    string
		wantErr string
	}{
		{class: nil, lookup: lookup, want: ""},
		{class: utilptr.To("fast"), lookup: lookup, want: "io.containerd.kata.v2"},
		{class: utilptr.To("test"), lookup: lookup, want: "io.containerd.runc.v2"},
		{class: utilptr.To("odd"), lookup: lookup, wantErr: `failed to get sandbox runtime: no runtime for "gvisor" is configured`},
		{class: utilptr.To("gone"), lookup: lookup, wantErr: `RuntimeClass "gone" not found`},
		{class: utilptr.To("fast"), lookup: nil, wantErr: `RuntimeClass "fast": no API server to look it up`},
	}
	for _, tt := range tests {
		pod := &v1.Pod{Spec: v1.PodSpec{RuntimeClassName: tt.class}}
		got, err := RuntimeType(context.Background(), pod, tt.lookup, handlers)
		if got != tt.want || errString(err) != tt.wantErr {
			t.Errorf("RuntimeType(%v) = %q, %v; want %q, %q", tt.class, got, err, tt.want, tt.wantErr)
		}
	}
}
