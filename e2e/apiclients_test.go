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

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// An agent whose API clients are set in a KubeletConfiguration drop-in
// (low rates, JSON requests) takes them without a warning, joins, runs a
// pod and reports its Events through the Events client.
func TestAgentWithAPIClientSettings(t *testing.T) {
	t.Parallel()
	a, _ := podAgent(t, "")
	dropIn := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n" +
		"kubeAPIQPS: 5\nkubeAPIBurst: 10\neventRecordQPS: 2\neventBurst: 3\ncontentType: application/json\n"
	if err := os.WriteFile(filepath.Join(a.configDir, "10-clients.conf"), []byte(dropIn), 0o644); err != nil {
		t.Fatal(err)
	}
	a.start()
	ctx := context.Background()
	a.waitReady(ctx, 60*time.Second)

	name := a.node + "-clients"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  containers:
  - name: main
    image: %s
    command: ["sleep", "3600"]
`, testimage.Ref)), "apply", "-f", "-")
	a.waitPod(ctx, name, 60*time.Second, "running", running)
	a.waitEvent(ctx, "default", "involvedObject.name="+name, "the agent's Started event", func(e corev1.Event) bool {
		return e.Reason == "Started" && e.Source.Host == a.node
	})
	if out := a.out.String(); strings.Contains(out, "does not support") {
		t.Errorf("the API client fields were reported unsupported:\n%s", out)
	}
}
