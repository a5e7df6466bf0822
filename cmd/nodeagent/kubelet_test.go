package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/config"
)

// kubeadm's KubeletVersionCheck parses `kubelet --version` with this
// expression (cmd/kubeadm/app/preflight/utils.go, GetKubeletVersion).
var kubeadmKubeletVersion = regexp.MustCompile(`^\s*Kubernetes v((0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)([-\w.+]*)?)\s*$`)

func TestKubeletVersionLineParsesAsKubeadmDoes(t *testing.T) {
	for _, v := range []string{"dev", "1.2.0", "0.0.0-20261127-abc+dirty", "v1.3.0~rc1"} {
		var out bytes.Buffer
		saved := version
		version = v
		code := runKubelet([]string{"--version"}, &out, &out)
		version = saved
		if code != 0 {
			t.Fatalf("version %q: exit %d: %s", v, code, out.String())
		}
		m := kubeadmKubeletVersion.FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("version %q: kubeadm cannot parse %q", v, out.String())
		}
		if got := m[2] + "." + m[3] + "." + m[4]; got != "1.34.4" {
			t.Errorf("version %q: kubeadm reads %s, want 1.34.4", v, got)
		}
	}
}

func TestParseKubeletArgs(t *testing.T) {
	// kubeadm's kubelet.service drop-in and kubeadm-flags.env, with an
	// operator's kubeletExtraArgs.
	args := strings.Fields(`--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf
		--config=/var/lib/kubelet/config.yaml --container-runtime-endpoint=unix:///var/run/containerd/containerd.sock
		--pod-infra-container-image=registry.k8s.io/pause:3.10.1 --hostname-override=worker-1
		--register-with-taints=dedicated=infra:NoSchedule,gpu:NoExecute --node-labels=tier=web,zone=a --node-ip 10.0.0.5 -v=2`)
	k, err := parseKubeletArgs(args)
	if err != nil {
		t.Fatal(err)
	}
	o := k.opts
	if o.Path != "/var/lib/kubelet/config.yaml" || *o.Overrides.Kubeconfig != "/etc/kubernetes/kubelet.conf" ||
		*o.Overrides.BootstrapKubeconfig != "/etc/kubernetes/bootstrap-kubelet.conf" ||
		*o.Overrides.ContainerRuntimeEndpoint != "unix:///var/run/containerd/containerd.sock" ||
		*o.Overrides.HostnameOverride != "worker-1" || *o.Overrides.NodeIP != "10.0.0.5" || *o.Overrides.Verbosity != 2 {
		t.Errorf("options: %+v", o)
	}
	wantTaints := []v1.Taint{{Key: "dedicated", Value: "infra", Effect: v1.TaintEffectNoSchedule}, {Key: "gpu", Effect: v1.TaintEffectNoExecute}}
	if len(o.Overrides.RegisterWithTaints) != 2 || o.Overrides.RegisterWithTaints[0] != wantTaints[0] || o.Overrides.RegisterWithTaints[1] != wantTaints[1] {
		t.Errorf("taints: %+v", o.Overrides.RegisterWithTaints)
	}
	if o.Overrides.NodeLabels["tier"] != "web" || o.Overrides.NodeLabels["zone"] != "a" {
		t.Errorf("labels: %v", o.Overrides.NodeLabels)
	}
	if len(k.warnings) != 1 || !strings.Contains(k.warnings[0], "--pod-infra-container-image") {
		t.Errorf("warnings: %q", k.warnings)
	}
}

func TestParseKubeletArgsRefusesByName(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"--fail-swap-on=false", "flag --fail-swap-on is not supported"},
		{"--cgroup-driver systemd", "flag --cgroup-driver is not supported"},
		{"--cloud-provider=external", "--cloud-provider=external is not supported"},
		{"--register-with-taints=a=b", "want key[=value]:Effect"},
		{"--register-with-taints=a=b:Sometimes", `effect "Sometimes"`},
		{"--node-labels=nolabel", "want key=value"},
		{"--version=raw", "--version=raw is not supported"},
		{"--kubeconfig", "needs a value"},
		{"stray", `unexpected argument "stray"`},
	} {
		_, err := parseKubeletArgs(strings.Fields(tc.args))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestRunKubeletRequiresKubeconfig(t *testing.T) {
	var out bytes.Buffer
	if code := runKubelet(nil, &out, &out); code != 1 || !strings.Contains(out.String(), "--kubeconfig is required") {
		t.Errorf("exit %d: %s", code, out.String())
	}
}

// The agent started as kubelet takes kubelet's defaults for rootDir and
// healthzPort unless a file or flag sets them.
func TestKubeletDefaults(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nhealthzPort: 10300\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	k, err := parseKubeletArgs([]string{"--config=" + file, "--kubeconfig=/etc/kubernetes/kubelet.conf"})
	if err != nil {
		t.Fatal(err)
	}
	k.opts.Overrides.KubeletDefaults = true
	cfg, _, err := config.Load(k.opts)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RootDir != "/var/lib/kubelet" || cfg.CertDirectory() != "/var/lib/kubelet/pki" || cfg.HealthzPort != 10300 {
		t.Errorf("rootDir %s, certDir %s, healthzPort %d; want /var/lib/kubelet, /var/lib/kubelet/pki, 10300 (the file's)", cfg.RootDir, cfg.CertDirectory(), cfg.HealthzPort)
	}
	k, _ = parseKubeletArgs([]string{"--kubeconfig=/k", "--root-dir=/srv/kubelet"})
	k.opts.Overrides.KubeletDefaults = true
	cfg, warnings, err := config.Load(k.opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range warnings {
		if strings.Contains(w, "healthzPort") {
			t.Errorf("as kubelet, kubelet's healthz port draws a warning: %s", w)
		}
	}
	if cfg.RootDir != "/srv/kubelet" || cfg.HealthzPort != 10248 {
		t.Errorf("rootDir %s, healthzPort %d; want /srv/kubelet (the flag's), 10248 (kubelet's)", cfg.RootDir, cfg.HealthzPort)
	}
}
