package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeagent/nodeagent/internal/testing/testenv"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/runtime"
)

// metrics-server's image as its release names it, built here from the
// binary hack/build-metrics-server.sh makes from the pinned module, laid out
// as its Dockerfile (the binary alone at /, run as its entrypoint).
const metricsServerRef = "registry.k8s.io/metrics-server/metrics-server:v0.8.0"

// metricsServerManifests are upstream's components.yaml (v0.8.0's
// manifests/base: the ServiceAccount, the aggregated reader role, the
// auth-delegator and extension-apiserver-authentication-reader bindings,
// system:metrics-server, the Service and the Deployment) with what this
// machine needs, each said where it is:
//   - hostNetwork, and the API server's address in KUBERNETES_SERVICE_HOST/
//     PORT: there is no kube-proxy, so a pod reaches the API server (on
//     loopback) only from the host's network, and the API server reaches
//     the pod at its endpoint (the host's address, --enable-aggregator-routing);
//   - --secure-port a free port and --bind-address the pod's IP (the
//     node's InternalIP), for 10250 is the node API's;
//   - --node-selector and a nodeSelector for the test's node: the shared
//     test cluster holds other tests' nodes;
//   - --metric-resolution=10s (the least it takes) and the readiness probe
//     every second without upstream's 20 s delay, so that the test waits
//     less; --kubelet-request-timeout=5s, as the resolution must exceed it.
//
// The node's serving certificate is verified as metrics-server does by
// default: with the cluster CA of its in-cluster configuration (the
// agent's serverTLSBootstrap certificate is signed by it), without
// --kubelet-insecure-tls. The APIService is applied separately, once the
// Deployment's pod is Ready (metricsServerAPIService).
const metricsServerManifests = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: metrics-server
  namespace: kube-system
  labels: {k8s-app: metrics-server}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:aggregated-metrics-reader
  labels:
    k8s-app: metrics-server
    rbac.authorization.k8s.io/aggregate-to-view: "true"
    rbac.authorization.k8s.io/aggregate-to-edit: "true"
    rbac.authorization.k8s.io/aggregate-to-admin: "true"
rules:
- apiGroups: ["metrics.k8s.io"]
  resources: ["pods", "nodes"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: metrics-server-auth-reader
  namespace: kube-system
  labels: {k8s-app: metrics-server}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: extension-apiserver-authentication-reader
subjects:
- kind: ServiceAccount
  name: metrics-server
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: metrics-server:system:auth-delegator
  labels: {k8s-app: metrics-server}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:auth-delegator
subjects:
- kind: ServiceAccount
  name: metrics-server
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:metrics-server
  labels: {k8s-app: metrics-server}
rules:
- apiGroups: [""]
  resources: ["nodes/metrics"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["pods", "nodes"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:metrics-server
  labels: {k8s-app: metrics-server}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:metrics-server
subjects:
- kind: ServiceAccount
  name: metrics-server
  namespace: kube-system
---
apiVersion: v1
kind: Service
metadata:
  name: metrics-server
  namespace: kube-system
  labels: {k8s-app: metrics-server}
spec:
  selector: {k8s-app: metrics-server}
  ports:
  - name: https
    port: 443
    protocol: TCP
    targetPort: https
    appProtocol: https
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: metrics-server
  namespace: kube-system
  labels: {k8s-app: metrics-server}
spec:
  selector:
    matchLabels: {k8s-app: metrics-server}
  strategy:
    rollingUpdate: {maxUnavailable: 0}
  template:
    metadata:
      labels: {k8s-app: metrics-server}
    spec:
      serviceAccountName: metrics-server
      hostNetwork: true
      terminationGracePeriodSeconds: 1
      volumes:
      - name: tmp-dir
        emptyDir: {}
      priorityClassName: system-cluster-critical
      containers:
      - name: metrics-server
        image: %[1]s
        imagePullPolicy: IfNotPresent
        args:
        - --cert-dir=/tmp
        - --secure-port=%[2]d
        - --bind-address=$(POD_IP)
        - --kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname
        - --kubelet-use-node-status-port
        - --metric-resolution=10s
        - --kubelet-request-timeout=5s
        - --node-selector=kubernetes.io/hostname=%[3]s
        env:
        - name: POD_IP
          valueFrom: {fieldRef: {fieldPath: status.podIP}}
        - name: KUBERNETES_SERVICE_HOST
          value: "127.0.0.1"
        - name: KUBERNETES_SERVICE_PORT
          value: "%[4]d"
        resources:
          requests: {cpu: 100m, memory: 200Mi}
        ports:
        - name: https
          containerPort: %[2]d
          protocol: TCP
        readinessProbe:
          httpGet: {path: /readyz, port: https, scheme: HTTPS}
          periodSeconds: 1
          failureThreshold: 3
        livenessProbe:
          httpGet: {path: /livez, port: https, scheme: HTTPS}
          periodSeconds: 10
          failureThreshold: 3
        securityContext:
          readOnlyRootFilesystem: true
          runAsNonRoot: true
          runAsUser: 1000
          allowPrivilegeEscalation: false
          seccompProfile: {type: RuntimeDefault}
          capabilities: {drop: [ALL]}
        volumeMounts:
        - name: tmp-dir
          mountPath: /tmp
      nodeSelector:
        kubernetes.io/os: linux
        kubernetes.io/hostname: %[3]s
`

// metricsServerAPIService is upstream's APIService, verbatim.
const metricsServerAPIService = `apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1beta1.metrics.k8s.io
  labels: {k8s-app: metrics-server}
spec:
  service:
    name: metrics-server
    namespace: kube-system
  group: metrics.k8s.io
  version: v1beta1
  insecureSkipTLSVerify: true
  groupPriorityMinimum: 100
  versionPriority: 100
`

// kubectl top pod and kubectl top node through a real metrics-server,
// deployed as upstream's manifest deploys it and reaching the agent's
// /metrics/resource with a service account token (authenticated and
// authorized by the agent through TokenReview and SubjectAccessReview) over
// TLS verified against the cluster CA: a pod burning CPU under a 200m limit
// shows more than 0 and at most its limit, and a working set that matches
// its cgroup's; the node shows CPU and memory within the machine's.
func TestKubectlTop(t *testing.T) {
	t.Parallel()
	began := time.Now()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(filepath.Join(root, "_output", "bin", "metrics-server"))
	if err != nil {
		t.Fatalf("metrics-server is built by hack/build-metrics-server.sh (make metrics-server): %v", err)
	}
	a, rt := readyPodAgent(t, "serverTLSBootstrap: true\n")
	ctx := context.Background()
	env := a.env
	importMetricsServer(t, rt, bin)

	// The pod to measure first, so that it is in both of metrics-server's
	// first two scrapes: a busy loop under a 200m limit holding a 4 MB
	// string.
	name := a.node + "-burn"
	kubectl(t, env, podYAML(name, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  containers:
  - name: spin
    image: %s
    command: ["sh", "-c", "x=$(head -c 4000000 /dev/zero | busybox tr '\\0' a); while true; do :; done"]
    resources:
      limits: {cpu: 200m, memory: 64Mi}
`, testimage.Ref)), "apply", "-f", "-")

	// The node's serving certificate from the cluster CA, as an operator
	// gets it: serverTLSBootstrap and an approved CSR.
	a.waitKubeletPort(ctx)
	kubectl(t, env, "", "certificate", "approve", waitServingCSR(t, a))
	a.waitServingCertFromCA(t)

	port := freePort(t)
	apiPort, err := strconv.Atoi(env.APIServerURL[strings.LastIndexByte(env.APIServerURL, ':')+1:])
	if err != nil {
		t.Fatal(err)
	}
	manifests := fmt.Sprintf(metricsServerManifests, metricsServerRef, port, a.node, apiPort)
	// Cleanups run last first: the APIService goes before the Deployment
	// (an APIService whose server is gone makes every client's discovery
	// of metrics.k8s.io fail), and both before the agent's cleanup deletes
	// the node's pods (the Deployment would make another).
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := kubectlOut(t, env, "-n", "kube-system", "logs", "deployment/metrics-server", "--tail=60")
			t.Logf("metrics-server's log:\n%s", out)
		}
		kubectlStdin(t, env, manifests, "delete", "--ignore-not-found", "--wait=false", "--grace-period=1", "-f", "-")
	})
	kubectl(t, env, manifests, "apply", "-f", "-")
	deployed := time.Now()
	msPod := waitNamespacedPod(t, env, "kube-system", "k8s-app=metrics-server", 90*time.Second, "Ready on "+a.node, func(p *corev1.Pod) bool {
		return p.Spec.NodeName == a.node && p.DeletionTimestamp == nil && podCondition(p, corev1.PodReady) == corev1.ConditionTrue
	})
	t.Logf("metrics-server %s Ready %.1fs after it was deployed (host network, %s:%d)", msPod.Name, time.Since(deployed).Seconds(), msPod.Status.PodIP, port)
	t.Cleanup(func() {
		kubectlStdin(t, env, metricsServerAPIService, "delete", "--ignore-not-found", "-f", "-")
	})
	kubectl(t, env, metricsServerAPIService, "apply", "-f", "-")
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		out, err := kubectlOut(t, env, "get", "apiservice", "v1beta1.metrics.k8s.io", "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
		return err == nil && out == "True", nil
	})
	if err != nil {
		out, _ := kubectlOut(t, env, "get", "apiservice", "v1beta1.metrics.k8s.io", "-o", "yaml")
		t.Fatalf("APIService v1beta1.metrics.k8s.io not Available: %v\n%s", err, out)
	}

	// The pod through the metrics API: exact figures.
	var pm struct {
		Window     metav1.Duration `json:"window"`
		Containers []struct {
			Name  string              `json:"name"`
			Usage corev1.ResourceList `json:"usage"`
		} `json:"containers"`
	}
	var lastErr string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 45*time.Second, true, func(context.Context) (bool, error) {
		out, err := kubectlOut(t, env, "get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/"+name)
		if err != nil {
			lastErr = out
			return false, nil
		}
		return json.Unmarshal([]byte(out), &pm) == nil && len(pm.Containers) == 1, nil
	})
	if err != nil {
		t.Fatalf("no metrics for pod %s: %v; last answer: %s", name, err, lastErr)
	}
	ws := containerWorkingSet(t, rt, name)
	cpu, mem := pm.Containers[0].Usage[corev1.ResourceCPU], pm.Containers[0].Usage[corev1.ResourceMemory]
	t.Logf("metrics API: pod %s cpu %s memory %s (window %s); its cgroup's working set now %d", name, cpu.String(), mem.String(), pm.Window.Duration, ws)
	if pm.Containers[0].Name != "spin" {
		t.Errorf("container %q, want spin", pm.Containers[0].Name)
	}
	// A busy loop gets up to its 200m (less on a loaded machine: more
	// than nothing), and no more than the quota allows (the window is one
	// or two CFS periods' worth of slack).
	if m := cpu.MilliValue(); m <= 0 || m > 250 {
		t.Errorf("pod %s cpu %dm: a busy loop under a 200m limit", name, m)
	}
	// The working set metrics-server read (at its last scrape) and the
	// cgroup's now: the same 4 MB string and shell, within 2 MiB.
	if d := mem.Value() - int64(ws); mem.Value() < 4e6 || d > 2<<20 || d < -2<<20 {
		t.Errorf("pod %s memory %d bytes, its cgroup's working set %d", name, mem.Value(), ws)
	}

	// kubectl top, as an operator runs it.
	out, err := kubectlOut(t, env, "top", "pod", name, "--no-headers")
	if err != nil {
		t.Fatalf("kubectl top pod: %v\n%s", err, out)
	}
	f := strings.Fields(out)
	if len(f) != 3 || f[0] != name {
		t.Fatalf("kubectl top pod %s: %q", name, out)
	}
	if q, err := resource.ParseQuantity(f[1]); err != nil || q.MilliValue() <= 0 || q.MilliValue() > 250 {
		t.Errorf("kubectl top pod: CPU %q", f[1])
	}
	if q, err := resource.ParseQuantity(f[2]); err != nil || q.Value() < 3<<20 || q.Value() > 64<<20 {
		t.Errorf("kubectl top pod: memory %q (a 4 MB string under a 64Mi limit)", f[2])
	}
	out, err = kubectlOut(t, env, "top", "node", a.node, "--no-headers")
	if err != nil {
		t.Fatalf("kubectl top node: %v\n%s", err, out)
	}
	t.Logf("kubectl top pod: %s; kubectl top node: %s", strings.Join(f, " "), strings.Join(strings.Fields(out), " "))
	// NAME CPU(cores) CPU(%) MEMORY(bytes) MEMORY(%)
	f = strings.Fields(out)
	if len(f) != 5 || f[0] != a.node {
		t.Fatalf("kubectl top node %s: %q", a.node, out)
	}
	node, err := env.Admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cores, memTotal := node.Status.Capacity[corev1.ResourceCPU], node.Status.Capacity[corev1.ResourceMemory]
	// The node (the whole machine's root cgroup): at least the busy loop's
	// share of a core, at most every core. A rate from two samples of a
	// cumulative counter, each stamped a moment before its read, can
	// exceed the machine by the stamps' jitter when every core is busy (a
	// loaded CI machine's 2002m of 2 cores): 5% of room for that, which
	// still tells a unit or a cgroup error.
	if q, err := resource.ParseQuantity(f[1]); err != nil || q.MilliValue() <= 0 || q.MilliValue() > cores.MilliValue()*105/100 {
		t.Errorf("kubectl top node: CPU %q of %s cores", f[1], cores.String())
	}
	if q, err := resource.ParseQuantity(f[3]); err != nil || q.Value() < 64<<20 || q.Value() > memTotal.Value() {
		t.Errorf("kubectl top node: memory %q of %s", f[3], memTotal.String())
	}
	t.Logf("kubectl top answered %.1fs after the test began", time.Since(began).Seconds())
}

// kubectlStdin is kubectlOut with stdin, for cleanups: it logs a failure
// rather than failing the test.
func kubectlStdin(t *testing.T, env *testenv.Env, stdin string, args ...string) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Log(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "_output", "bin", "kubectl"), append([]string{"--kubeconfig", env.AdminKubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Logf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func importMetricsServer(t *testing.T, rt *runtime.Runtime, bin []byte) {
	t.Helper()
	a, err := testimage.Spec{
		Ref: metricsServerRef,
		Files: []testimage.File{
			testimage.Dir("tmp", 0o1777),
			testimage.Reg("metrics-server", 0o755, bin),
		},
		Entrypoint: []string{"/metrics-server"},
	}.Archive()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := rt.ImportImage(ctx, bytes.NewReader(a)); err != nil {
		t.Fatal(err)
	}
}

// waitNamespacedPod polls the pods of namespace matching selector until
// one satisfies cond, and returns it.
func waitNamespacedPod(t *testing.T, env *testenv.Env, namespace, selector string, timeout time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := env.Admin.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, nil
		}
		for i := range list.Items {
			last = &list.Items[i]
			if cond(last) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		if last != nil {
			t.Fatalf("%s pod %s: %s not seen within %s; last status: phase=%s conditions=%+v containers=%+v", namespace, selector, what, timeout, last.Status.Phase, last.Status.Conditions, last.Status.ContainerStatuses)
		}
		t.Fatalf("%s pod %s: none within %s", namespace, selector, timeout)
	}
	return last
}

// containerWorkingSet is the working set of the running container of pod
// name, read from its cgroup as kubelet defines it: usage less inactive
// file pages (v1 memory.usage_in_bytes and total_inactive_file, v2
// memory.current and inactive_file).
func containerWorkingSet(t *testing.T, rt *runtime.Runtime, name string) uint64 {
	t.Helper()
	cs, err := rt.ListContainers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	path := ""
	for _, c := range cs {
		if c.Pod.Name == name && c.State == runtime.StateRunning {
			path = runtime.CgroupfsPath(c.CgroupsPath)
		}
	}
	if path == "" {
		t.Fatalf("no running container of pod %s", name)
	}
	stat := func(file, key string) uint64 {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, key+" "); ok {
				n, _ := strconv.ParseUint(v, 10, 64)
				return n
			}
		}
		t.Fatalf("%s: no %s", file, key)
		return 0
	}
	number := func(file string) uint64 {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	var usage, inactive uint64
	if v1 := "/sys/fs/cgroup/memory" + path; fileExists(v1 + "/memory.usage_in_bytes") {
		usage, inactive = number(v1+"/memory.usage_in_bytes"), stat(v1+"/memory.stat", "total_inactive_file")
	} else {
		v2 := "/sys/fs/cgroup" + path
		usage, inactive = number(v2+"/memory.current"), stat(v2+"/memory.stat", "inactive_file")
	}
	if inactive > usage {
		return 0
	}
	return usage - inactive
}

// waitServingCSR waits for the agent's kubelet-serving CSR and returns its
// name; the CSR is deleted when the test ends.
func waitServingCSR(t *testing.T, a *agent) string {
	t.Helper()
	user := "system:node:" + a.node
	var csrName string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := a.env.Admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range list.Items {
			if c.Spec.Username == user && c.Spec.SignerName == certv1.KubeletServingSignerName {
				csrName = c.Name
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no serving CSR from %s: %v", user, err)
	}
	t.Cleanup(func() {
		_ = a.env.Admin.CertificatesV1().CertificateSigningRequests().Delete(context.Background(), csrName, metav1.DeleteOptions{})
	})
	return csrName
}

// waitServingCertFromCA waits until the node API serves a certificate
// that verifies against the cluster CA for the node's name, and returns it.
func (a *agent) waitServingCertFromCA(t *testing.T) *x509.Certificate {
	t.Helper()
	caPEM, err := os.ReadFile(a.env.CACert)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	var got *x509.Certificate
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", a.apiPort), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return false, nil
		}
		got = conn.ConnectionState().PeerCertificates[0]
		conn.Close()
		_, err = got.Verify(x509.VerifyOptions{Roots: roots, DNSName: a.node, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		return err == nil, nil
	})
	if err != nil {
		if got == nil {
			t.Fatalf("the node API does not answer TLS: %v", err)
		}
		t.Fatalf("the node API does not serve the issued certificate: subject %s issuer %s SANs %v %v", got.Subject, got.Issuer, got.DNSNames, got.IPAddresses)
	}
	return got
}
