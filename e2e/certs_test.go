package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeagent/nodeagent/internal/testing/localcluster"
	"github.com/nodeagent/nodeagent/internal/testing/testenv"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// bootstrapAgent is an agent with no kubeconfig yet and a bootstrap
// kubeconfig with token: it must obtain its certificate itself.
func bootstrapAgent(t *testing.T, env *testenv.Env, token string) (*agent, string) {
	t.Helper()
	dir := t.TempDir()
	boot := filepath.Join(dir, "bootstrap-kubelet.conf")
	if err := env.BootstrapKubeconfig(boot, token); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, env, agentOpts{kubeconfig: filepath.Join(dir, "kubelet.conf"), config: "rotateCertificates: true\n"})
	a.args = append(a.args, "--bootstrap-kubeconfig", boot)
	return a, filepath.Join(a.dir, "root", "pki")
}

// health GETs one of the agent's health endpoints.
func (a *agent) health(path string) (int, string) {
	resp, err := http.Get(a.healthURL + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// (a) A node with only a bootstrap token becomes Ready with a certificate
// it obtained itself, stored as kubelet stores it.
func TestTLSBootstrap(t *testing.T) {
	t.Parallel()
	env := testenv.Cluster(t)
	ctx := context.Background()
	token, err := env.CreateBootstrapToken(ctx, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a, certDir := bootstrapAgent(t, env, token)
	a.start()
	a.waitReady(ctx, 90*time.Second)

	cur := filepath.Join(certDir, "kubelet-client-current.pem")
	target, err := os.Readlink(cur)
	if err != nil || !strings.HasPrefix(filepath.Base(target), "kubelet-client-") || filepath.Base(target) == "kubelet-client-current.pem" {
		t.Fatalf("kubelet-client-current.pem -> %q, %v; want a kubelet-client-<time>.pem symlink", target, err)
	}
	data, err := os.ReadFile(cur)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatal("no certificate in kubelet-client-current.pem")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(env.CACert)
	if err != nil {
		t.Fatal(err)
	}
	caBlock, _ := pem.Decode(caPEM)
	ca, err := x509.ParseCertificate(caBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "system:node:"+a.node || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "system:nodes" {
		t.Errorf("certificate subject %s", cert.Subject)
	}
	if cert.Issuer.String() != ca.Subject.String() || cert.CheckSignatureFrom(ca) != nil {
		t.Errorf("certificate issued by %s, not the cluster CA %s", cert.Issuer, ca.Subject)
	}
	kc, err := os.ReadFile(a.kubeconfig)
	if err != nil || !strings.Contains(string(kc), cur) {
		t.Errorf("kubeconfig %s does not name %s: %v\n%s", a.kubeconfig, cur, err, kc)
	}
	if _, err := os.Stat(filepath.Join(certDir, "kubelet-client.key.tmp")); !os.IsNotExist(err) {
		t.Errorf("the pending key outlived the bootstrap: %v", err)
	}
	// The CSR: kubelet's name, signer, usages, requested by the token's
	// user and approved by kube-controller-manager.
	id, _, _ := strings.Cut(token, ".")
	csrs, err := env.Admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range csrs.Items {
		if c.Spec.Username != "system:bootstrap:"+id {
			continue
		}
		found = true
		if !strings.HasPrefix(c.Name, "node-csr-") || c.Spec.SignerName != certv1.KubeAPIServerClientKubeletSignerName ||
			len(c.Spec.Usages) != 2 || c.Spec.Usages[0] != certv1.UsageDigitalSignature || c.Spec.Usages[1] != certv1.UsageClientAuth {
			t.Errorf("CSR %s: signer %s usages %v", c.Name, c.Spec.SignerName, c.Spec.Usages)
		}
	}
	if !found {
		t.Error("no CSR from the bootstrap token's user")
	}
	// A restart uses the stored certificate: no second CSR.
	a.stop(syscall.SIGTERM)
	a.start()
	a.waitReady(ctx, 60*time.Second)
	if n := strings.Count(a.out.String(), "certificate requested"); n != 0 { // a.out is the new process's
		t.Errorf("the restarted agent requested %d certificates; it has a valid one", n)
	}
}

// (b) A denied CSR and an invalid token each give a clear error on
// /readyz and in the log, and are retried; the agent stays live.
func TestTLSBootstrapFailures(t *testing.T) {
	t.Parallel()
	env := testenv.Cluster(t)
	ctx := context.Background()

	t.Run("denied", func(t *testing.T) {
		t.Parallel()
		// A token whose group may create CSRs but is not auto-approved.
		group := "system:bootstrappers:nodeagent-e2e-manual"
		if err := env.BindClusterRole(ctx, "nodeagent-e2e-manual-bootstrap", "system:node-bootstrapper", group); err != nil {
			t.Fatal(err)
		}
		token, err := env.CreateBootstrapToken(ctx, 10*time.Minute, group)
		if err != nil {
			t.Fatal(err)
		}
		id, _, _ := strings.Cut(token, ".")
		a, _ := bootstrapAgent(t, env, token)
		a.start()
		pending := func() []certv1.CertificateSigningRequest {
			var out []certv1.CertificateSigningRequest
			l, err := env.Admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil
			}
			for _, c := range l.Items {
				if c.Spec.Username == "system:bootstrap:"+id && len(c.Status.Conditions) == 0 {
					out = append(out, c)
				}
			}
			return out
		}
		var first certv1.CertificateSigningRequest
		waitFor(t, 60*time.Second, func() bool {
			p := pending()
			if len(p) == 1 {
				first = p[0]
			}
			return len(p) == 1
		}, "the agent's CSR")
		waitFor(t, 30*time.Second, func() bool {
			code, body := a.health("/readyz")
			return code == 500 && strings.Contains(body, "not approved yet")
		}, "/readyz saying the CSR is not approved yet")
		first.Status.Conditions = []certv1.CertificateSigningRequestCondition{{Type: certv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "E2EDenied", Message: "denied by the test"}}
		if _, err := env.Admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, first.Name, &first, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, func() bool {
			code, body := a.health("/readyz")
			return code == 500 && strings.Contains(body, "denied") && strings.Contains(body, "E2EDenied")
		}, "/readyz saying the CSR was denied")
		// The agent logs the denial right after /readyz can report it.
		waitFor(t, 10*time.Second, func() bool {
			return strings.Contains(a.out.String(), "certificate signing request denied")
		}, "the log saying the CSR was denied")
		// Retried with a new key: a new CSR, which the test approves.
		var second certv1.CertificateSigningRequest
		waitFor(t, 60*time.Second, func() bool {
			p := pending()
			if len(p) == 1 && p[0].Name != first.Name {
				second = p[0]
				return true
			}
			return false
		}, "a new CSR after the denial")
		if code, body := a.health("/livez"); code != 200 {
			t.Errorf("/livez %d %s while bootstrapping: systemd would restart the agent", code, body)
		}
		second.Status.Conditions = []certv1.CertificateSigningRequestCondition{{Type: certv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "E2EApproved", Message: "approved by the test"}}
		if _, err := env.Admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, second.Name, &second, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		a.waitReady(ctx, 60*time.Second)
	})

	t.Run("invalid token", func(t *testing.T) {
		t.Parallel()
		a, _ := bootstrapAgent(t, env, "abcdef.0123456789abcdef")
		a.start()
		waitFor(t, 60*time.Second, func() bool {
			code, body := a.health("/readyz")
			return code == 500 && strings.Contains(body, "401 Unauthorized")
		}, "/readyz saying the bootstrap credentials were rejected")
		waitFor(t, 60*time.Second, func() bool {
			return strings.Count(a.out.String(), "certificate request failed; retrying") >= 2
		}, "a retry")
		if !strings.Contains(a.out.String(), "credentials rejected by the API server") {
			t.Errorf("the log does not name the rejected credentials:\n%s", a.out)
		}
		if code, body := a.health("/livez"); code != 200 {
			t.Errorf("/livez %d %s: systemd would restart the agent", code, body)
		}
		select {
		case <-a.exited:
			t.Fatal("the agent exited")
		default:
		}
	})
}

// (c) Client certificate rotation against a cluster that signs short-lived
// certificates: the agent rotates repeatedly with no gap in its Lease
// renewals and Ready throughout, and a pod's kubectl logs -f neither ends
// nor skips a line, nor does its container restart. Short form (make test): 2-minute
// certificates (kube-controller-manager backdates NotBefore by 5 minutes,
// so the agent renews 0–80 s after each issuance), at least 3 certificates
// in 5 minutes. Long form (NODEAGENT_ROTATION_LONG=1, make
// test-rotation): 10-minute certificates, at least 3 rotations in 30
// minutes.
func TestClientCertificateRotation(t *testing.T) {
	t.Parallel()
	signing, window, want := 2*time.Minute, 5*time.Minute, 3
	if os.Getenv("NODEAGENT_ROTATION_LONG") != "" {
		signing, window, want = 10*time.Minute, 30*time.Minute, 4 // the first is the kubeconfig's immediate replacement
	}
	env := testenv.OwnCluster(t, localcluster.Options{ClusterSigningDuration: signing})
	// The own cluster has no containerd; the shared one's serves the
	// agent's runtime (a node without a runtime is never Ready).
	env.ContainerdAddress = testenv.Cluster(t).ContainerdAddress
	ctx := context.Background()
	a, _ := podAgentOn(t, env, "rotateCertificates: true\n")
	a.start()
	a.waitReady(ctx, 90*time.Second)
	a.waitKubeletPort(ctx)

	// A pod that writes a numbered line every second, followed with
	// kubectl logs -f (API server → node API) across the rotations: the
	// stream must neither end nor skip a line, and the container must not
	// restart.
	name := a.node + "-ticker"
	// The cluster is new: kube-controller-manager creates the default
	// ServiceAccount shortly after it starts, and admission refuses pods
	// until then.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := env.Admin.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("ServiceAccount default/default never appeared: %v", err)
	}
	kubectl(t, env, podYAML(name, a.node, fmt.Sprintf(`  containers:
  - name: tick
    image: %s
    command: ["sh", "-c", "i=0; while true; do echo tick $i; i=$((i+1)); sleep 1; done"]
`, testimage.Ref)), "apply", "-f", "-")
	pod := a.waitPod(ctx, name, 60*time.Second, "running", running)
	containerID := pod.Status.ContainerStatuses[0].ContainerID
	root, _ := testenv.RepoRoot()
	fctx, cancelFollow := context.WithCancel(ctx)
	defer cancelFollow()
	follow := exec.CommandContext(fctx, filepath.Join(root, "_output", "bin", "kubectl"), "--kubeconfig", env.AdminKubeconfig, "logs", "-f", name)
	var followed syncBuffer
	follow.Stdout, follow.Stderr = &followed, &followed
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	followEnded := make(chan error, 1)
	go func() { followEnded <- follow.Wait() }()

	start := time.Now()
	logAtStart := len(a.out.String())
	var lastRenew time.Time
	maxGap := time.Duration(0)
	notReady := 0
	_ = wait.PollUntilContextTimeout(ctx, 2*time.Second, window, true, func(ctx context.Context) (bool, error) {
		if l, err := a.lease(ctx); err == nil && l.Spec.RenewTime != nil {
			rt := l.Spec.RenewTime.Time
			if !lastRenew.IsZero() && rt.After(lastRenew) {
				maxGap = max(maxGap, rt.Sub(lastRenew))
			}
			if rt.After(lastRenew) {
				lastRenew = rt
			}
		}
		if n, err := env.Admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{}); err == nil {
			if c := condition(n, corev1.NodeReady); c == nil || c.Status != corev1.ConditionTrue {
				notReady++
			}
		}
		return strings.Count(a.out.String(), "certificate issued") >= want && time.Since(start) > signing, nil
	})
	issued := strings.Count(a.out.String(), "certificate issued")
	t.Logf("%d certificates issued in %s; longest gap between Lease renewals seen %s", issued, time.Since(start).Round(time.Second), maxGap)
	if issued < want {
		t.Errorf("%d certificates issued in %s, want at least %d", issued, window, want)
	}
	// Renewals every 10 s, sampled every 2 s: a missed window shows as a
	// gap of 20 s or more.
	if maxGap >= 20*time.Second {
		t.Errorf("a Lease renewal window was missed: %s between renewals", maxGap)
	}
	if notReady > 0 {
		t.Errorf("the node was not Ready in %d samples", notReady)
	}
	if strings.Contains(a.out.String()[logAtStart:], "lease renewal attempt failed") {
		t.Errorf("a Lease renewal attempt failed across the rotations:\n%s", a.out)
	}
	select {
	case <-a.exited:
		t.Fatal("the agent exited")
	default:
	}

	// The follow is still open and still current, with every line in order.
	select {
	case err := <-followEnded:
		t.Fatalf("kubectl logs -f ended during the rotations (%v):\n%s", err, followed.String())
	default:
	}
	// Both the follow's output and the container's log file are read
	// while they grow: only their whole lines count (a torn last line is
	// the next read's).
	wholeLines := func(text string) []string {
		text = text[:strings.LastIndexByte(text, '\n')+1]
		if text == "" {
			return nil
		}
		return strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	}
	lastTick := func(text string) (last, count int) {
		last = -1
		for i, l := range wholeLines(text) {
			var n int
			if _, err := fmt.Sscanf(l, "tick %d", &n); err != nil {
				t.Fatalf("line %d: %q", i, l)
			}
			if last >= 0 && n != last+1 {
				t.Fatalf("went from tick %d to tick %d", last, n)
			}
			last, count = n, count+1
		}
		return last, count
	}
	p, err := env.Admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].RestartCount != 0 || cs[0].ContainerID != containerID || cs[0].State.Running == nil {
		t.Fatalf("the container restarted or stopped across the rotations: %+v", cs)
	}
	// What the container has written by now (its log file) reaches the
	// follow within seconds.
	b, err := os.ReadFile(a.logPath(p, "tick", 0))
	if err != nil {
		t.Fatal(err)
	}
	var written int
	if ls := wholeLines(string(b)); len(ls) > 0 {
		if _, err := fmt.Sscanf(ls[len(ls)-1][strings.LastIndex(ls[len(ls)-1], " tick ")+1:], "tick %d", &written); err != nil {
			t.Fatalf("last log line %q", ls[len(ls)-1])
		}
	}
	var last, count int
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		last, count = lastTick(followed.String())
		return last >= written, nil
	})
	if last < written {
		t.Fatalf("kubectl logs -f reached tick %d; the container had written tick %d", last, written)
	}
	t.Logf("kubectl logs -f followed %d lines across the rotations", count)
}
