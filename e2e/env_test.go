package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// nameServiceConfig gives the agent a cluster DNS address and domain.
const nameServiceConfig = "clusterDNS: [\"10.96.0.10\"]\nclusterDomain: cluster.local\n"

// section returns what a container printed between "--- name" and the
// next "---" line (log is a CRI log file: "<time> <stream> <tag> <line>").
func section(log, name string) string {
	var b strings.Builder
	for _, l := range strings.Split(log, "\n") {
		if f := strings.SplitN(l, " ", 4); len(f) == 4 {
			b.WriteString(f[3] + "\n")
		}
	}
	_, rest, ok := strings.Cut(b.String(), "--- "+name+"\n")
	if !ok {
		return ""
	}
	s, _, _ := strings.Cut(rest, "\n---")
	return s
}

// A pod's containers get kubelet's environment (envFrom and valueFrom
// ConfigMap/Secret keys read with the node's credentials, downward API
// fields and resources, service links of the pod's namespace and the
// master service) and name-service files (the managed /etc/hosts with the
// pod's hostname and hostAliases, resolv.conf from clusterDNS and
// dnsConfig, the hostname in the pod's UTS namespace). The upstream specs:
// pods.go "should contain environment variables for services",
// configmap.go/secrets.go "consumable via environment variable",
// downwardapi.go, kubelet.go hostAliases, dns.go dnsConfig.
func TestPodEnvironmentAndNameFiles(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, nameServiceConfig)
	ctx := context.Background()
	admin := a.env.Admin
	cmName, secretName, svcName := a.node+"-cm", a.node+"-secret", "svc-"+a.node

	if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: cmName}, Data: map[string]string{"color": "blue", "size": "xl"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName}, Data: map[string][]byte{"password": []byte("hunter2")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := admin.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svcName},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8765, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().ConfigMaps("default").Delete(context.Background(), cmName, metav1.DeleteOptions{})
		_ = admin.CoreV1().Secrets("default").Delete(context.Background(), secretName, metav1.DeleteOptions{})
		_ = admin.CoreV1().Services("default").Delete(context.Background(), svcName, metav1.DeleteOptions{})
	})
	master, err := admin.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	name := a.node + "-env"
	yaml := strings.Replace(podYAML(name, a.node, fmt.Sprintf(`  hostname: myhost
  subdomain: mysub
  hostAliases:
  - ip: 192.0.2.77
    hostnames: [alias-one, alias-two]
  dnsConfig:
    searches: [extra.example]
    options: [{name: ndots, value: "2"}, {name: edns0}]
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "echo '--- env'; env; echo '--- hosts'; cat /etc/hosts; echo '--- resolv'; cat /etc/resolv.conf; echo '--- hostname'; hostname; echo '---'; echo end-of-output; exec sleep 3600"]
    resources:
      limits: {memory: 64Mi}
      requests: {cpu: 250m}
    envFrom:
    - configMapRef: {name: %s}
      prefix: CM_
    - secretRef: {name: missing-but-optional, optional: true}
    env:
    - {name: PASSWORD, valueFrom: {secretKeyRef: {name: %s, key: password}}}
    - {name: COLOR, valueFrom: {configMapKeyRef: {name: %s, key: color}}}
    - {name: NOKEY, valueFrom: {configMapKeyRef: {name: %s, key: nokey, optional: true}}}
    - {name: CM_size, value: overridden}
    - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: POD_LABEL, valueFrom: {fieldRef: {fieldPath: "metadata.labels['tier']"}}}
    - {name: SA, valueFrom: {fieldRef: {fieldPath: spec.serviceAccountName}}}
    - {name: HOST_IPS, valueFrom: {fieldRef: {fieldPath: status.hostIPs}}}
    - {name: MEM_LIMIT_MI, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}}
    - {name: CPU_REQUEST_M, valueFrom: {resourceFieldRef: {resource: requests.cpu, divisor: 1m}}}
    - {name: CPU_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.cpu}}}
    - {name: EXPANDED, value: "$(COLOR)-$(%s_SERVICE_PORT)"}
`, testimage.Ref, cmName, secretName, cmName, cmName, strings.ToUpper(strings.ReplaceAll(svcName, "-", "_")))),
		"  namespace: default\n", "  namespace: default\n  labels: {tier: backend}\n", 1)
	kubectl(t, a.env, yaml, "apply", "-f", "-")
	p := a.waitPod(ctx, name, 60*time.Second, "running", running)
	log := a.waitLog(p, "c", 0, "end-of-output")

	node, err := admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cpu := node.Status.Allocatable.Cpu()
	svcPrefix := strings.ToUpper(strings.ReplaceAll(svcName, "-", "_"))
	env := map[string]string{}
	for _, l := range strings.Split(section(log, "env"), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	want := map[string]string{
		"CM_color":      "blue",
		"CM_size":       "overridden",
		"PASSWORD":      "hunter2",
		"COLOR":         "blue",
		"POD_NAME":      name,
		"SA":            "default",
		"POD_LABEL":     "backend",
		"HOST_IPS":      p.Status.HostIP,
		"MEM_LIMIT_MI":  "64",
		"CPU_REQUEST_M": "250",
		// No cpu limit: the node's allocatable, in whole cores rounded up.
		"CPU_LIMIT":                        fmt.Sprint((cpu.MilliValue() + 999) / 1000),
		"EXPANDED":                         "blue-8765",
		svcPrefix + "_SERVICE_HOST":        svc.Spec.ClusterIP,
		svcPrefix + "_SERVICE_PORT":        "8765",
		svcPrefix + "_SERVICE_PORT_HTTP":   "8765",
		svcPrefix + "_PORT":                "tcp://" + svc.Spec.ClusterIP + ":8765",
		svcPrefix + "_PORT_8765_TCP_PROTO": "tcp",
		svcPrefix + "_PORT_8765_TCP_ADDR":  svc.Spec.ClusterIP,
		"KUBERNETES_SERVICE_HOST":          master.Spec.ClusterIP,
		"KUBERNETES_SERVICE_PORT":          fmt.Sprint(master.Spec.Ports[0].Port),
		"KUBERNETES_PORT_443_TCP":          fmt.Sprintf("tcp://%s:%d", master.Spec.ClusterIP, master.Spec.Ports[0].Port),
		"KUBERNETES_SERVICE_PORT_HTTPS":    fmt.Sprint(master.Spec.Ports[0].Port),
		svcPrefix + "_PORT_8765_TCP_PORT":  "8765",
		svcPrefix + "_PORT_8765_TCP":       "tcp://" + svc.Spec.ClusterIP + ":8765",
		"KUBERNETES_PORT_443_TCP_PROTO":    "tcp",
		"KUBERNETES_PORT":                  fmt.Sprintf("tcp://%s:%d", master.Spec.ClusterIP, master.Spec.Ports[0].Port),
		"KUBERNETES_PORT_443_TCP_ADDR":     master.Spec.ClusterIP,
		"KUBERNETES_PORT_443_TCP_PORT":     fmt.Sprint(master.Spec.Ports[0].Port),
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if _, ok := env["NOKEY"]; ok {
		t.Error("NOKEY is set; an optional missing key sets nothing")
	}
	if t.Failed() {
		t.Logf("container output:\n%s", log)
	}

	hosts := section(log, "hosts")
	for _, w := range []string{"# Kubernetes-managed hosts file.", "127.0.0.1\tlocalhost",
		"# Entries added by HostAliases.\n192.0.2.77\talias-one\talias-two"} {
		if !strings.Contains(hosts, w) {
			t.Errorf("/etc/hosts lacks %q:\n%s", w, hosts)
		}
	}
	resolv := section(log, "resolv")
	wantResolv := "search default.svc.cluster.local svc.cluster.local cluster.local"
	if !strings.HasPrefix(resolv, wantResolv) || !strings.Contains(resolv, "extra.example\n") ||
		!strings.Contains(resolv, "nameserver 10.96.0.10\n") || !strings.Contains(resolv, "options ndots:2 edns0") {
		t.Errorf("/etc/resolv.conf:\n%s", resolv)
	}
	if h := strings.TrimSpace(section(log, "hostname")); h != "myhost" {
		t.Errorf("hostname %q, want myhost (spec.hostname)", h)
	}

	// Host network: the node's hosts file with the aliases (kubelet.go
	// "should write entries to /etc/hosts when hostNetwork is set").
	hn := a.node + "-hostnet-aliases"
	kubectl(t, a.env, podYAML(hn, a.node, fmt.Sprintf(`  hostNetwork: true
  hostAliases:
  - ip: 192.0.2.78
    hostnames: [hostnet-alias]
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "echo '--- hosts'; cat /etc/hosts; echo '---'; echo end-of-output; exec sleep 3600"]
`, testimage.Ref)), "apply", "-f", "-")
	hp := a.waitPod(ctx, hn, 60*time.Second, "running", running)
	hlog := a.waitLog(hp, "c", 0, "end-of-output")
	if h := section(hlog, "hosts"); !strings.Contains(h, "# Kubernetes-managed hosts file (host network).") ||
		!strings.Contains(h, "192.0.2.78\thostnet-alias") {
		t.Errorf("host-network /etc/hosts:\n%s", h)
	}
}

// A container whose ConfigMap does not exist waits with kubelet's
// CreateContainerConfigError and message, and starts once the ConfigMap
// is created.
func TestMissingConfigMapThenCreated(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	admin := a.env.Admin
	cmName := a.node + "-late"
	t.Cleanup(func() {
		_ = admin.CoreV1().ConfigMaps("default").Delete(context.Background(), cmName, metav1.DeleteOptions{})
	})
	name := a.node + "-waits"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "echo value=$VALUE; exec sleep 3600"]
    env:
    - {name: VALUE, valueFrom: {configMapKeyRef: {name: %s, key: k}}}
`, testimage.Ref, cmName)), "apply", "-f", "-")
	wantMsg := fmt.Sprintf("configmap %q not found", cmName)
	a.waitPod(ctx, name, 30*time.Second, "CreateContainerConfigError", func(p *corev1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason == "CreateContainerConfigError" && w.Message == wantMsg {
				return true
			}
		}
		return false
	})
	if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: cmName}, Data: map[string]string{"k": "arrived"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := a.waitPod(ctx, name, 90*time.Second, "running", running)
	a.waitLog(p, "c", 0, "value=arrived")
}
