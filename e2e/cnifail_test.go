package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// failingPlugin is a CNI plugin that supports CNI 1.0.0 and fails every ADD
// with a message of its own, noting the time of each ADD in a log.
const failingPlugin = `#!/bin/sh
case "$CNI_COMMAND" in
VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}' ;;
ADD)
	date +%s.%N >> "$(dirname "$0")/adds.log"
	echo '{"cniVersion":"1.0.0","code":11,"msg":"the test plugin fails on purpose"}'
	exit 1 ;;
*) ;;
esac
`

// TestFailingCNIPluginGivesPodEvent: while the node's first CNI
// configuration names a plugin that fails ADD, a new pod gets kubelet's
// FailedCreatePodSandBox event with containerd's wording and the plugin's
// message, stays Pending (ContainerCreating) and is retried with growing
// delays; a pod already running is not disturbed. Once the broken
// configuration is removed the new pod starts on the good network.
func TestFailingCNIPluginGivesPodEvent(t *testing.T) {
	t.Parallel()
	binDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(binDir, "nodeagent-test-fail"), []byte(failingPlugin), 0o755); err != nil {
		t.Fatal(err)
	}
	a := readyCNIAgent(t, "", binDir)
	ctx := context.Background()

	steady := a.node + "-steady"
	kubectl(t, a.env, podYAML(steady, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
`, testimage.Ref)), "apply", "-f", "-")
	sp := a.waitPod(ctx, steady, 60*time.Second, "running with a pod IP", func(p *corev1.Pod) bool { return running(p) && p.Status.PodIP != "" })

	// A configuration that sorts first and is usable (its plugin exists and
	// answers VERSION) but fails every ADD.
	brokenName := "broken-" + a.cni.Name
	broken := filepath.Join(a.confDir, "05-broken.conflist")
	writeFileAtomic(t, broken, fmt.Sprintf(`{"cniVersion": "1.0.0", "name": %q, "plugins": [{"type": "nodeagent-test-fail"}]}`, brokenName))
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return a.out.Contains("network=" + brokenName), nil
	})
	if err != nil {
		t.Fatalf("the agent did not load the broken configuration: %v\n%s", err, a.out)
	}

	victim := a.node + "-victim"
	kubectl(t, a.env, podYAML(victim, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
`, testimage.Ref)), "apply", "-f", "-")
	vp := a.waitPod(ctx, victim, 30*time.Second, "seen by the agent", func(p *corev1.Pod) bool { return len(p.Status.ContainerStatuses) > 0 })
	want := fmt.Sprintf("Failed to create pod sandbox: failed to setup network for sandbox %q: ", vp.UID)
	a.waitEvent(ctx, "default", "involvedObject.name="+victim, "FailedCreatePodSandBox with the plugin's error", func(e corev1.Event) bool {
		return e.Reason == "FailedCreatePodSandBox" && e.Type == corev1.EventTypeWarning && strings.HasPrefix(e.Message, want) &&
			strings.Contains(e.Message, "the test plugin fails on purpose")
	})

	// Retried with back-off: at least three ADDs, further apart each time.
	addsLog := filepath.Join(binDir, "adds.log")
	var adds []time.Time
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		adds = readTimes(t, addsLog)
		return len(adds) >= 3, nil
	})
	if err != nil {
		t.Fatalf("ADDs at %v: want three retries", adds)
	}
	gap1, gap2 := adds[1].Sub(adds[0]), adds[2].Sub(adds[1])
	t.Logf("ADD retried after %v, then %v", gap1.Round(time.Millisecond), gap2.Round(time.Millisecond))
	if gap1 < 900*time.Millisecond || gap2 <= gap1 {
		t.Errorf("ADD retries after %v then %v: want at least 1s, growing", gap1, gap2)
	}
	vp = a.waitPod(ctx, victim, 5*time.Second, "still Pending", phaseIs(corev1.PodPending))
	if w := vp.Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "ContainerCreating" {
		t.Errorf("victim's container state %+v, want waiting ContainerCreating", vp.Status.ContainerStatuses[0].State)
	}
	still := a.waitPod(ctx, steady, 5*time.Second, "still running", running)
	if still.Status.ContainerStatuses[0].RestartCount != 0 || still.Status.ContainerStatuses[0].ContainerID != sp.Status.ContainerStatuses[0].ContainerID || still.Status.PodIP != sp.Status.PodIP {
		t.Errorf("the running pod was disturbed: %+v podIP %s (was %s)", still.Status.ContainerStatuses, still.Status.PodIP, sp.Status.PodIP)
	}

	// The broken configuration goes: the next retry uses the good one.
	if err := os.Remove(broken); err != nil {
		t.Fatal(err)
	}
	vp = a.waitPod(ctx, victim, 90*time.Second, "running with a pod IP", func(p *corev1.Pod) bool { return running(p) && p.Status.PodIP != "" })
	if !strings.HasPrefix(vp.Status.PodIP, strings.Join(strings.Split(sp.Status.PodIP, ".")[:3], ".")+".") {
		t.Errorf("victim podIP %s, want one of the good network (steady pod %s)", vp.Status.PodIP, sp.Status.PodIP)
	}
}

// readTimes reads a log of Unix times (date +%s.%N), one a line.
func readTimes(t *testing.T, path string) []time.Time {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	// Only whole lines: the plugin may be appending one as the file is
	// read (a torn last line is the next read's).
	b = b[:bytes.LastIndexByte(b, '\n')+1]
	var out []time.Time
	for _, l := range strings.Fields(string(b)) {
		var sec, nsec int64
		if _, err := fmt.Sscanf(strings.Replace(l, ".", " ", 1), "%d %d", &sec, &nsec); err != nil {
			t.Fatalf("%s: %q: %v", path, l, err)
		}
		out = append(out, time.Unix(sec, nsec))
	}
	return out
}
