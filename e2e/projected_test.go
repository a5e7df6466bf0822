package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// saScript prints what a pod sees of its service account.
const saScript = `cat /var/run/secrets/kubernetes.io/serviceaccount/namespace; echo; ` +
	`wc -c /var/run/secrets/kubernetes.io/serviceaccount/token; ` +
	`ls /var/run/secrets/kubernetes.io/serviceaccount/; sleep 3600`

// kubectlRun creates a pod the way a user does, `kubectl run`, so that the
// API server's ServiceAccount admission adds the kube-api-access-* projected
// volume. overrides is the JSON of --overrides.
func kubectlRun(t *testing.T, a *agent, name, overrides string) {
	t.Helper()
	ctx := context.Background()
	// kube-controller-manager creates the default ServiceAccount shortly
	// after the cluster starts; until then admission refuses the pod.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := a.env.Admin.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("ServiceAccount default/default never appeared: %v", err)
	}
	t.Cleanup(func() {
		// A pod the scheduler never bound is not deleted by podAgent's
		// cleanup.
		zero := int64(0)
		_ = a.env.Admin.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	kubectl(t, a.env, "", "run", name, "-n", "default", "--image="+testimage.Ref, "--restart=Never",
		"--overrides="+overrides, "--", "sh", "-c", saScript)
}

var tokenSize = regexp.MustCompile(`(\d+) /var/run/secrets/kubernetes.io/serviceaccount/token`)

// checkServiceAccountVolume checks what the pod's container printed and
// that the token on the host is a valid token of default/default bound to
// the pod, and ca.crt the cluster's CA bundle.
func checkServiceAccountVolume(t *testing.T, a *agent, p *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	log := a.waitLog(p, p.Name, 0, "default", "/var/run/secrets/kubernetes.io/serviceaccount/token", "ca.crt", "namespace")
	m := tokenSize.FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no token size in the log:\n%s", log)
	}
	if n, _ := strconv.Atoi(m[1]); n == 0 {
		t.Errorf("the container sees an empty token:\n%s", log)
	}

	var vol string
	for _, v := range p.Spec.Volumes {
		if strings.HasPrefix(v.Name, "kube-api-access-") && v.Projected != nil {
			vol = v.Name
		}
	}
	if vol == "" {
		t.Fatalf("pod has no kube-api-access volume: %+v", p.Spec.Volumes)
	}
	dir := filepath.Join(a.rootDir(), "pods", string(p.UID), "volumes", "projected", vol)
	token, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log, fmt.Sprintf("%d /var/run/secrets/kubernetes.io/serviceaccount/token", len(token))) {
		t.Errorf("the container's token size differs from the host's %d bytes:\n%s", len(token), log)
	}
	tr, err := a.env.Admin.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: string(token)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Status.Authenticated || tr.Status.User.Username != "system:serviceaccount:default:default" {
		t.Errorf("token review: authenticated=%v user=%q error=%q", tr.Status.Authenticated, tr.Status.User.Username, tr.Status.Error)
	}
	if got := tr.Status.User.Extra["authentication.kubernetes.io/pod-uid"]; len(got) != 1 || got[0] != string(p.UID) {
		t.Errorf("token bound to pod UID %q, want %s", got, p.UID)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	cm, err := a.env.Admin.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(ca) != cm.Data["ca.crt"] {
		t.Errorf("ca.crt on the host (%d bytes) is not kube-root-ca.crt's (%d bytes)", len(ca), len(cm.Data["ca.crt"]))
	}
}

// A pod from `kubectl run` bound to the node gets its service account
// token, the cluster CA and its namespace in the kube-api-access volume,
// read with the node's credentials.
func TestKubectlRunPodGetsServiceAccountVolume(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()

	name := a.node + "-sa"
	kubectlRun(t, a, name, fmt.Sprintf(`{"spec":{"nodeName":%q}}`, a.node))
	p := a.waitPod(ctx, name, 60*time.Second, "running", running)
	checkServiceAccountVolume(t, a, p)

	// Deleting the pod unmounts its volumes.
	kubectl(t, a.env, "", "delete", "pod", "-n", "default", name, "--grace-period=1", "--wait=true", "--timeout=60s")
	podDir := filepath.Join(a.rootDir(), "pods", string(p.UID))
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, err := os.Lstat(podDir)
		return os.IsNotExist(err), nil
	})
	if err != nil {
		t.Errorf("pod directory %s still there after the pod was deleted", podDir)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), podDir) {
		t.Errorf("mounts under %s remain after the pod was deleted", podDir)
	}
}

// A pod created without nodeName is bound by kube-scheduler (the agent's
// node is schedulable once Ready) and runs there. The nodeSelector keeps it
// off the other tests' nodes.
func TestScheduledPodRuns(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	// The node lifecycle controller removes the not-ready taint after
	// Ready.
	a.waitNode(ctx, 60*time.Second, "no taints", func(n *corev1.Node) bool { return len(n.Spec.Taints) == 0 })

	name := a.node + "-sched"
	kubectlRun(t, a, name, fmt.Sprintf(`{"spec":{"nodeSelector":{"kubernetes.io/hostname":%q}}}`, a.node))
	p := a.waitPod(ctx, name, 60*time.Second, "running", running)
	if p.Spec.NodeName != a.node {
		t.Fatalf("pod bound to %q, want %q", p.Spec.NodeName, a.node)
	}
	if podCondition(p, corev1.PodScheduled) != corev1.ConditionTrue {
		t.Errorf("PodScheduled = %q, want True", podCondition(p, corev1.PodScheduled))
	}
	checkServiceAccountVolume(t, a, p)
}
