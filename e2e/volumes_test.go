package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// Secret, configMap, downwardAPI and projected volumes with items, modes
// and subPaths; an update of the ConfigMap, the Secret and the pod's
// labels reaches the running container.
func TestSecretConfigMapDownwardAPIVolumes(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	name := a.node + "-vols"
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Data: map[string][]byte{"user": []byte("admin"), "pass": []byte("s3cret")}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Data: map[string]string{"a": "1", "app.conf": "conf-v1"}, BinaryData: map[string][]byte{"bin": []byte("BIN")}}
	if _, err := a.env.Admin.CoreV1().Secrets("default").Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.env.Admin.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = a.env.Admin.CoreV1().Secrets("default").Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = a.env.Admin.CoreV1().ConfigMaps("default").Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	// The container prints what it sees every 100ms, one line per round.
	script := `grep -E ' /(sec|cm|down|proj) ' /proc/mounts | sed 's/^/mount: /'; ` +
		`echo "modes: $(stat -L -c %a /sec/u/name) $(stat -L -c %a /cm/a) $(stat -L -c %a /proj/p)"; ` +
		`echo "app.conf: $(cat /etc/app.conf)"; echo "bin: $(cat /cm/bin)"; ` +
		`echo sub > /work/f; echo mine > /mine/f; ls /all | sort | tr '\n' ' ' | sed 's/^/all: /'; echo; ` +
		`while true; do echo "round: a=$(cat /cm/a) user=$(cat /sec/u/name) proj=$(cat /proj/p)$(cat /proj/q) ` +
		`labels=$(cat /down/labels | tr '\n' ,) mem=$(cat /down/mem) cpu=$(cat /down/cpu) end"; sleep 0.1; done`
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  volumes:
  - name: sec
    secret:
      secretName: %[2]s
      defaultMode: 0400
      items: [{key: user, path: u/name}]
  - name: cm
    configMap: {name: %[2]s}
  - name: down
    downwardAPI:
      items:
      - {path: labels, fieldRef: {fieldPath: metadata.labels}}
      - {path: mem, resourceFieldRef: {containerName: c, resource: limits.memory, divisor: 1Mi}}
      - {path: cpu, resourceFieldRef: {containerName: c, resource: limits.cpu, divisor: 1m}}
  - name: proj
    projected:
      defaultMode: 0440
      sources:
      - secret: {name: %[2]s, items: [{key: pass, path: p}]}
      - configMap: {name: %[2]s, items: [{key: a, path: q}]}
  - name: scratch
    emptyDir: {}
  containers:
  - name: c
    image: %[1]s
    command: ["sh", "-c", %[3]q]
    env:
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    resources:
      limits: {memory: 64Mi}
    volumeMounts:
    - {name: sec, mountPath: /sec}
    - {name: cm, mountPath: /cm}
    - {name: down, mountPath: /down}
    - {name: proj, mountPath: /proj}
    - {name: cm, mountPath: /etc/app.conf, subPath: app.conf}
    - {name: scratch, mountPath: /work, subPath: sub/dir}
    - {name: scratch, mountPath: /mine, subPathExpr: "$(POD_NAME)"}
    - {name: scratch, mountPath: /all}
`, testimage.Ref, name, script)), "apply", "-f", "-")
	p := a.waitPod(ctx, name, 60*time.Second, "Running", running)
	node, err := a.env.Admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cpu := node.Status.Allocatable.Cpu().MilliValue() // no cpu limit: the node's allocatable
	// A whole round (" end" and its record's newline): the log is read
	// while the container appends, and a torn first round would lack
	// what the checks below want.
	log := a.waitLog(p, "c", 0, "round:", " end\n")
	for _, want := range []string{
		"mount: tmpfs /sec tmpfs", "modes: 400 644 440", "app.conf: conf-v1", "bin: BIN",
		"all: sub " + name + " ",
		fmt.Sprintf("round: a=1 user=admin proj=s3cret1 labels= mem=64 cpu=%d end", cpu),
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the container's output lacks %q:\n%.3000s", want, log)
		}
	}
	scratch := filepath.Join(a.rootDir(), "pods", string(p.UID), "volumes", "empty-dir", "scratch")
	for f, want := range map[string]string{"sub/dir/f": "sub\n", name + "/f": "mine\n"} {
		if b, err := os.ReadFile(filepath.Join(scratch, f)); err != nil || string(b) != want {
			t.Errorf("%s in the emptyDir: %q, %v; want %q", f, b, err, want)
		}
	}

	// Updates: the ConfigMap, the Secret and the pod's labels.
	start := time.Now()
	cm.Data["a"] = "2"
	if _, err := a.env.Admin.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	sec.Data["user"] = []byte("root")
	if _, err := a.env.Admin.CoreV1().Secrets("default").Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.env.Admin.CoreV1().Pods("default").Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"front"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	wantLine := fmt.Sprintf(`round: a=2 user=root proj=s3cret2 labels=tier="front" mem=64 cpu=%d end`, cpu)
	deadline := time.Now().Add(70 * time.Second) // kubelet's bound: syncFrequency (1m) + the cache's delay
	for !strings.Contains(a.logOf(p, "c", 0), wantLine) {
		if time.Now().After(deadline) {
			t.Fatalf("updates not seen within 70s; want %q, output ends:\n%s", wantLine, tail(a.logOf(p, "c", 0), 1500))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("updates seen in the container %v after the API writes", time.Since(start).Round(10*time.Millisecond))
	// No round read an empty or missing file during the swaps.
	for _, l := range strings.Split(a.logOf(p, "c", 0), "\n") {
		if i := strings.Index(l, "round: "); i >= 0 {
			l = l[i:]
			if !strings.HasSuffix(l, " end") {
				continue
			}
			for _, bad := range []string{"a= ", "user= ", "proj= "} {
				if strings.Contains(l, bad) {
					t.Errorf("a round read an empty file: %q", l)
				}
			}
		}
	}
	// Deleting the pod unmounts its subPath binds and volumes and removes
	// its directory.
	zero := int64(0)
	if err := a.env.Admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	podDir := filepath.Join(a.rootDir(), "pods", string(p.UID))
	for deadline := time.Now().Add(30 * time.Second); fileExists(podDir); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			mounts, _ := os.ReadFile("/proc/self/mountinfo")
			t.Fatalf("%s still exists 30s after the pod's deletion; mounts under it:\n%s", podDir, grepLines(string(mounts), podDir))
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Optional missing Secret and ConfigMap: empty volumes, the pod runs. A
// required missing Secret: the pod waits in ContainerCreating with
// kubelet's FailedMount event, and starts once the Secret exists.
func TestMissingSecretsAndConfigMaps(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	opt := a.node + "-optional"
	kubectl(t, a.env, podYAML(opt, a.node, fmt.Sprintf(`  volumes:
  - name: s
    secret: {secretName: %[2]s-nope, optional: true}
  - name: c
    configMap: {name: %[2]s-nope, optional: true}
  containers:
  - name: c
    image: %[1]s
    command: ["sh", "-c", "echo files=$(ls /s /c | grep -v : | grep -c .); sleep 3600"]
    volumeMounts: [{name: s, mountPath: /s}, {name: c, mountPath: /c}]
`, testimage.Ref, opt)), "apply", "-f", "-")

	req := a.node + "-required"
	t.Cleanup(func() {
		_ = a.env.Admin.CoreV1().Secrets("default").Delete(context.Background(), req, metav1.DeleteOptions{})
	})
	kubectl(t, a.env, podYAML(req, a.node, fmt.Sprintf(`  volumes:
  - name: s
    secret: {secretName: %[2]s}
  containers:
  - name: c
    image: %[1]s
    command: ["sh", "-c", "echo key=$(cat /s/key); sleep 3600"]
    volumeMounts: [{name: s, mountPath: /s}]
`, testimage.Ref, req)), "apply", "-f", "-")

	p := a.waitPod(ctx, opt, 60*time.Second, "Running", running)
	a.waitLog(p, "c", 0, "files=0")

	a.waitEvent(ctx, "default", "involvedObject.name="+req, "FailedMount", func(e corev1.Event) bool {
		return e.Reason == "FailedMount" && e.Type == corev1.EventTypeWarning &&
			e.Message == fmt.Sprintf(`MountVolume.SetUp failed for volume "s" : secret %q not found`, req)
	})
	p = a.waitPod(ctx, req, 10*time.Second, "Pending in ContainerCreating", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return p.Status.Phase == corev1.PodPending && len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "ContainerCreating"
	})
	start := time.Now()
	if _, err := a.env.Admin.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: req}, StringData: map[string]string{"key": "value"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p = a.waitPod(ctx, req, 60*time.Second, "Running once the Secret exists", running)
	t.Logf("pod running %v after the Secret was created", time.Since(start).Round(10*time.Millisecond))
	a.waitLog(p, "c", 0, "key=value")
}

// A subPathExpr that expands to an absolute path fails the container with
// CreateContainerConfigError, as kubelet.
func TestSubPathExprRefused(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	name := a.node + "-badsub"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  volumes:
  - name: d
    emptyDir: {}
  containers:
  - name: c
    image: %s
    command: ["sleep", "3600"]
    env: [{name: P, value: /etc}]
    volumeMounts: [{name: d, mountPath: /x, subPathExpr: "$(P)"}]
`, testimage.Ref)), "apply", "-f", "-")
	a.waitPod(ctx, name, 30*time.Second, "CreateContainerConfigError", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "CreateContainerConfigError" &&
			strings.Contains(cs[0].State.Waiting.Message, "must not be an absolute path")
	})
}
