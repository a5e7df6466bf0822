package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeagent/nodeagent/internal/testing/testenv"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// cniNode is a started agent with a CNI network installed over its pod
// CIDR, as a network provider's DaemonSet would: confDir is its cniConfDir
// (holding cni.File's content), binDirs its cniBinDir.
type cniNode struct {
	*agent
	cni     *testenv.CNINetwork
	confDir string
	binDirs []string
}

// readyCNIAgent starts an agent (podAgent with extraConfig) whose
// cniConfDir receives a per-test bridge network once the node has a pod
// CIDR, and waits until the node is Ready. extraBinDirs come before the
// reference plugins in cniBinDir.
func readyCNIAgent(t *testing.T, extraConfig string, extraBinDirs ...string) *cniNode {
	t.Helper()
	bins := append(extraBinDirs, testenv.CNIPlugins(t)...)
	confDir := filepath.Join(t.TempDir(), "net.d")
	a, _ := podAgent(t, fmt.Sprintf("cniConfDir: %s\ncniBinDir: %s\n", confDir, strings.Join(bins, ","))+extraConfig)
	a.start()
	ctx := context.Background()
	n := a.waitNode(ctx, 60*time.Second, "a pod CIDR", func(n *corev1.Node) bool { return n.Spec.PodCIDR != "" })
	cni := testenv.WriteCNIConfig(t, n.Spec.PodCIDR)
	cni.Install(t, confDir)
	a.waitReady(ctx, 60*time.Second)
	return &cniNode{agent: a, cni: cni, confDir: confDir, binDirs: bins}
}

// natRulesOf is the iptables nat table's lines that name id (portmap and
// the bridge plugin put the CNI container ID, the pod UID, into their
// rules' comments).
func natRulesOf(t *testing.T, id string) []string {
	t.Helper()
	out, err := exec.Command("iptables-save", "-t", "nat").Output()
	if err != nil {
		t.Fatalf("iptables-save: %v", err)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, id) {
			lines = append(lines, l)
		}
	}
	return lines
}

// cniCacheEntry is the part of libcni's cache record
// (<rootDir>/cni/results/<network>-<container ID>-<ifname>) the tests read.
type cniCacheEntry struct {
	CapabilityArgs map[string]json.RawMessage `json:"capabilityArgs"`
	Result         struct {
		Interfaces []struct {
			Name    string `json:"name"`
			Sandbox string `json:"sandbox"`
		} `json:"interfaces"`
	} `json:"result"`
}

// cachedAttachment reads the agent's CNI cache record of a pod's eth0.
func cachedAttachment(t *testing.T, rootDir, uid string) cniCacheEntry {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(rootDir, "cni", "results", "*-"+uid+"-eth0"))
	if len(files) != 1 {
		t.Fatalf("CNI cache records of pod %s: %v, want one", uid, files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var e cniCacheEntry
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("%s: %v", files[0], err)
	}
	return e
}

// httpGet fetches / from addr with a raw HTTP/1.0 request (busybox httpd).
func httpGet(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.0\r\n\r\n"); err != nil {
		return "", err
	}
	var b bytes.Buffer
	_, err = io.Copy(&b, c)
	return b.String(), err
}

// TestHostPortAnswersOnTheHost: a pod on the CNI network with hostPorts
// (one on every host address, one on 127.0.0.1 only) answers on the host
// at 127.0.0.1:<hostPort> through the portmap plugin (portMappings
// capability); deleting the pod removes its port mappings, so the ports no
// longer answer and no nat rule names the pod.
func TestHostPortAnswersOnTheHost(t *testing.T) {
	t.Parallel()
	a := readyCNIAgent(t, "")
	ctx := context.Background()
	// Free ports: nothing else on the host answers there, so an answer is
	// the pod's.
	anyPort, loPort := freePort(t), freePort(t)
	name := a.node + "-hostport"
	kubectl(t, a.env, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: default
  annotations:
    kubernetes.io/ingress-bandwidth: 3M
    kubernetes.io/egress-bandwidth: 5M
spec:
  nodeName: %s
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "mkdir -p /www; echo hello-from-pod > /www/index.html; /bin/busybox httpd -p 8081 -h /www; exec /bin/busybox httpd -f -p 8080 -h /www"]
    ports:
    - {name: web, containerPort: 8080, hostPort: %d}
    - {name: local, containerPort: 8081, hostPort: %d, hostIP: 127.0.0.1, protocol: TCP}
`, name, a.node, testimage.Ref, anyPort, loPort), "apply", "-f", "-")
	p := a.waitPod(ctx, name, 60*time.Second, "running with a pod IP", func(p *corev1.Pod) bool { return running(p) && p.Status.PodIP != "" })

	for _, port := range []int{anyPort, loPort} {
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		var got string
		var lastErr error
		// httpd starts after the container is reported running.
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
			got, lastErr = httpGet(addr)
			return lastErr == nil && strings.Contains(got, "hello-from-pod"), nil
		})
		if err != nil {
			t.Errorf("hostPort %s: no answer from the pod (last %q, %v); nat rules of the pod:\n%s", addr, got, lastErr, strings.Join(natRulesOf(t, string(p.UID)), "\n"))
		}
	}
	if len(natRulesOf(t, string(p.UID))) == 0 {
		t.Error("no nat rule names the pod's UID")
	}

	// What DEL needs is on disk: the capability arguments of ADD, in the
	// agent's CNI cache; the bandwidth plugin shaped the host side of the
	// pod's veth (ingress: a tbf qdisc on it; egress: on an ifb device).
	cached := cachedAttachment(t, a.rootDir(), string(p.UID))
	var pms []struct{ HostPort, ContainerPort int32 }
	if err := json.Unmarshal(cached.CapabilityArgs["portMappings"], &pms); err != nil || len(pms) != 2 || pms[0].HostPort != int32(anyPort) || pms[1].HostPort != int32(loPort) {
		t.Errorf("cached portMappings %s (%v), want hostPorts %d and %d", cached.CapabilityArgs["portMappings"], err, anyPort, loPort)
	}
	if bw := string(cached.CapabilityArgs["bandwidth"]); !strings.Contains(bw, `"ingressRate":3000000`) || !strings.Contains(bw, `"egressRate":5000000`) {
		t.Errorf("cached bandwidth %s, want ingressRate 3000000 and egressRate 5000000", bw)
	}
	if testenv.HasCNIPlugin(a.binDirs, "bandwidth") {
		// The host side: the veth (ingress) and the ifb device (egress).
		var qdiscs []string
		for _, i := range cached.Result.Interfaces {
			if i.Sandbox == "" && i.Name != a.cni.Bridge {
				out, err := exec.Command("tc", "qdisc", "show", "dev", i.Name).CombinedOutput()
				if err != nil {
					t.Errorf("tc qdisc show dev %s: %v: %s", i.Name, err, out)
				}
				qdiscs = append(qdiscs, i.Name+": "+string(out))
			}
		}
		all := strings.Join(qdiscs, "\n")
		if !strings.Contains(all, "tbf") || !strings.Contains(all, "rate 3Mbit") || !strings.Contains(all, "rate 5Mbit") {
			t.Errorf("the pod's host interfaces' qdiscs:\n%s\nwant tbf qdiscs with rates 3Mbit (ingress) and 5Mbit (egress)", all)
		}
	}

	// DEL removes the mappings (with the capability arguments recorded at
	// ADD).
	zero := int64(0)
	if err := a.env.Admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return !fileExists(filepath.Join(a.rootDir(), "pods", string(p.UID))), nil
	})
	if err != nil {
		t.Fatalf("the pod's directory outlived its deletion: %v", err)
	}
	if rules := natRulesOf(t, string(p.UID)); len(rules) != 0 {
		t.Errorf("nat rules of the deleted pod left behind:\n%s", strings.Join(rules, "\n"))
	}
	for _, port := range []int{anyPort, loPort} {
		if got, err := httpGet(fmt.Sprintf("127.0.0.1:%d", port)); err == nil && strings.Contains(got, "hello-from-pod") {
			t.Errorf("hostPort %d still answers after the pod was deleted", port)
		}
	}
}
