package admission

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilptr "k8s.io/utils/ptr"
)

func TestSafeSysctls(t *testing.T) {
	all := []string{
		"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
		"net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports",
		"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
		"net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
	}
	tests := []struct {
		release string
		want    []string
	}{
		{"6.1.0-18-amd64", all},
		{"4.15.0", all},
		{"4.14.300", all[:len(all)-2]},
		{"4.5.0", []string{
			"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
			"net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports",
			"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes",
		}},
		{"garbage", all[:5]},
	}
	for _, tt := range tests {
		if d := cmp.Diff(tt.want, SafeSysctls(tt.release)); d != "" {
			t.Errorf("SafeSysctls(%q) (-want +got):\n%s", tt.release, d)
		}
	}
}

func TestAdmitSecurity(t *testing.T) {
	safe := SafeSysctls("6.1.0")
	withSysctls := func(s ...v1.Sysctl) func(*v1.Pod) {
		return func(p *v1.Pod) { p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: s} }
	}
	tests := []struct {
		name        string
		opts        SecurityOptions
		mutate      func(*v1.Pod)
		wantReason  string
		wantMessage string
	}{
		{name: "plain pod", mutate: func(*v1.Pod) {}},
		{name: "windows pod", mutate: func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: v1.Windows} },
			wantReason: "PodOSNotSupported", wantMessage: "Failed to admit pod as the OS field doesn't match node OS"},
		{name: "windows os label", mutate: func(p *v1.Pod) { p.Labels = map[string]string{"kubernetes.io/os": "windows"} },
			wantReason: "PodOSSelectorNodeLabelDoesNotMatch", wantMessage: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"},
		{name: "empty os label", mutate: func(p *v1.Pod) { p.Labels = map[string]string{"kubernetes.io/os": ""} },
			wantReason: "PodOSSelectorNodeLabelDoesNotMatch", wantMessage: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"},
		{name: "windows os field", mutate: func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: v1.Windows} },
			wantReason: "PodOSNotSupported", wantMessage: "Failed to admit pod as the OS field doesn't match node OS"},
		{name: "strict supplemental groups",
			mutate: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: utilptr.To(v1.SupplementalGroupsPolicyStrict)}
			},
			wantReason: "SupplementalGroupsPolicyNotSupported", wantMessage: "SupplementalGroupsPolicy=Strict is not supported in this node"},
		{name: "strict supplemental groups advertised", opts: SecurityOptions{StrictSupplementalGroups: true},
			mutate: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: utilptr.To(v1.SupplementalGroupsPolicyStrict)}
			}},
		{name: "merge supplemental groups",
			mutate: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: utilptr.To(v1.SupplementalGroupsPolicyMerge)}
			}},
		{name: "safe sysctls", opts: SecurityOptions{SafeSysctls: safe},
			mutate: withSysctls(v1.Sysctl{Name: "kernel.shm_rmid_forced", Value: "1"}, v1.Sysctl{Name: "net/ipv4/ip_local_port_range", Value: "1024 65000"})},
		{name: "unsafe sysctl", opts: SecurityOptions{SafeSysctls: safe},
			mutate:     withSysctls(v1.Sysctl{Name: "kernel.msgmax", Value: "10000"}),
			wantReason: "SysctlForbidden", wantMessage: `forbidden sysctl: "kernel.msgmax" not allowlisted`},
		{name: "unsafe sysctl allowed by pattern", opts: SecurityOptions{SafeSysctls: safe, AllowedUnsafeSysctls: []string{"kernel.msg*"}},
			mutate: withSysctls(v1.Sysctl{Name: "kernel.msgmax", Value: "10000"})},
		{name: "unsafe sysctl allowed by name, slashes", opts: SecurityOptions{AllowedUnsafeSysctls: []string{"net.core.somaxconn"}},
			mutate: withSysctls(v1.Sysctl{Name: "net/core/somaxconn", Value: "1024"})},
		{name: "net sysctl with hostNetwork", opts: SecurityOptions{SafeSysctls: safe},
			mutate: func(p *v1.Pod) {
				withSysctls(v1.Sysctl{Name: "net.ipv4.tcp_syncookies", Value: "1"})(p)
				p.Spec.HostNetwork = true
			},
			wantReason: "SysctlForbidden", wantMessage: `forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host Net enabled`},
		{name: "ipc sysctl with hostIPC", opts: SecurityOptions{SafeSysctls: safe},
			mutate: func(p *v1.Pod) {
				withSysctls(v1.Sysctl{Name: "kernel.shm_rmid_forced", Value: "1"})(p)
				p.Spec.HostIPC = true
			},
			wantReason: "SysctlForbidden", wantMessage: `forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host IPC enabled`},
		{name: "apparmor runtime default without apparmor",
			mutate: func(p *v1.Pod) {
				p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}
			},
			wantReason: "AppArmor", wantMessage: "Cannot enforce AppArmor: AppArmor is not enabled on the host"},
		{name: "apparmor unconfined without apparmor",
			mutate: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}}
			}},
		{name: "apparmor localhost with apparmor", opts: SecurityOptions{AppArmorEnabled: true},
			mutate: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: utilptr.To("p")}}
			}},
		{name: "selinux options without selinux",
			mutate: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{SELinuxOptions: &v1.SELinuxOptions{Level: "s0:c1"}}
			}},
		{name: "selinux options with selinux", opts: SecurityOptions{SELinuxEnabled: true},
			mutate: func(p *v1.Pod) {
				p.Spec.Containers[1].SecurityContext = &v1.SecurityContext{SELinuxOptions: &v1.SELinuxOptions{Level: "s0:c1"}}
			},
			wantReason: "UnsupportedPodSpec", wantMessage: "Pod was rejected: nodeagent does not support: spec.containers[1].securityContext.seLinuxOptions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := supportedPod()
			tt.mutate(pod)
			ok, reason, msg := AdmitSecurity(pod, tt.opts)
			if ok != (tt.wantReason == "") || reason != tt.wantReason || msg != tt.wantMessage {
				t.Errorf("AdmitSecurity = %v, %q, %q; want %v, %q, %q", ok, reason, msg, tt.wantReason == "", tt.wantReason, tt.wantMessage)
			}
		})
	}
}

// With PodLevelResources off, a pod with pod-level resources is rejected
// with kubelet's reason and message; with it on (the default), admitted.
func TestAdmitFeatures(t *testing.T) {
	withPodLevel := supportedPod()
	withPodLevel.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}
	withImage := supportedPod()
	withImage.Spec.Volumes = append(withImage.Spec.Volumes, v1.Volume{Name: "img", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "example.com/data:1"}}})
	for _, tc := range []struct {
		name        string
		pod         *v1.Pod
		opts        SecurityOptions
		wantReason  string
		wantMessage string
		// imageVolumeOn sets opts.ImageVolume.
		imageVolumeOn bool
	}{
		{name: "gate on", pod: withPodLevel, imageVolumeOn: true},
		{name: "gate off", pod: withPodLevel, opts: SecurityOptions{PodLevelResourcesDisabled: true}, imageVolumeOn: true,
			wantReason: "PodLevelResourcesNotSupported", wantMessage: "PodLevelResources feature gate is disabled"},
		{name: "gate off, no pod-level resources", pod: supportedPod(), opts: SecurityOptions{PodLevelResourcesDisabled: true}, imageVolumeOn: true},
		{name: "image volume, ImageVolume off", pod: withImage,
			wantReason: "UnsupportedPodSpec", wantMessage: "Pod was rejected: spec.volumes[2].image: image volumes need the ImageVolume feature gate, which is off on this node"},
		{name: "image volume, ImageVolume on", pod: withImage, imageVolumeOn: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.ImageVolume = tc.imageVolumeOn
			ok, reason, msg := AdmitFeatures(tc.pod, tc.opts)
			if ok != (tc.wantReason == "") || reason != tc.wantReason || msg != tc.wantMessage {
				t.Errorf("AdmitFeatures = %v, %q, %q; want %q, %q", ok, reason, msg, tc.wantReason, tc.wantMessage)
			}
		})
	}
}
