package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/netns"
	"github.com/nodeagent/nodeagent/internal/testing/localcluster"
	"github.com/nodeagent/nodeagent/internal/testing/testenv"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// kubelet's Ready message without a usable CNI configuration.
const networkNotReady = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"

// TestReadyFollowsCNIConfiguration: a node whose CNI configuration
// directory is empty registers NotReady with kubelet's message; the
// controller manager gives it a pod CIDR; the network a CNI DaemonSet would
// install over that CIDR makes it Ready; removing it makes it NotReady
// again, restoring it Ready.
func TestReadyFollowsCNIConfiguration(t *testing.T) {
	env := testenv.Cluster(t)
	bins := testenv.CNIPlugins(t)
	confDir := filepath.Join(t.TempDir(), "net.d")
	a := newAgent(t, env, agentOpts{config: fmt.Sprintf("cniConfDir: %s\ncniBinDir: %s\n", confDir, strings.Join(bins, ","))})
	a.start()
	ctx := context.Background()

	n := a.waitNode(ctx, 60*time.Second, "Ready=False with NetworkPluginNotReady", func(n *corev1.Node) bool {
		c := condition(n, corev1.NodeReady)
		return c != nil && c.Status == corev1.ConditionFalse && c.Message == networkNotReady
	})
	if c := condition(n, corev1.NodeReady); c.Reason != "KubeletNotReady" {
		t.Fatalf("Ready %+v", c)
	}
	n = a.waitNode(ctx, 60*time.Second, "a pod CIDR", func(n *corev1.Node) bool { return n.Spec.PodCIDR != "" })
	if !strings.HasPrefix(n.Spec.PodCIDR, strings.TrimSuffix(localcluster.ClusterCIDR, "0.0/16")) {
		t.Fatalf("podCIDR %s is not in the cluster CIDR %s", n.Spec.PodCIDR, localcluster.ClusterCIDR)
	}

	// What a CNI DaemonSet does: write the network into the directory.
	cni := testenv.WriteCNIConfig(t, n.Spec.PodCIDR)
	file := cni.Install(t, confDir)
	start := time.Now()
	a.waitReady(ctx, 60*time.Second)
	t.Logf("Ready %v after the CNI configuration was written", time.Since(start).Round(time.Millisecond))

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	a.waitNode(ctx, 60*time.Second, "NotReady after the configuration was removed", func(n *corev1.Node) bool {
		c := condition(n, corev1.NodeReady)
		return c != nil && c.Status == corev1.ConditionFalse && c.Message == networkNotReady
	})
	cni.Install(t, confDir)
	a.waitReady(ctx, 60*time.Second)
	if !a.out.Contains("CNI network configuration loaded") {
		t.Errorf("the agent's log does not say which configuration it loaded:\n%s", a.out.String())
	}
}

// TestPodsReachEachOtherOverCNI: with a CNI network installed, pods get
// addresses in the node's pod CIDR, the address in status is the one on the
// pod's eth0, and one pod reaches another over TCP at its pod IP; deleting
// the pods tears their attachments down.
func TestPodsReachEachOtherOverCNI(t *testing.T) {
	env := testenv.Cluster(t)
	bins := testenv.CNIPlugins(t)
	confDir := filepath.Join(t.TempDir(), "net.d")
	a, _ := podAgent(t, fmt.Sprintf("cniConfDir: %s\ncniBinDir: %s\n", confDir, strings.Join(bins, ",")))
	_ = env
	a.start()
	ctx := context.Background()
	n := a.waitNode(ctx, 60*time.Second, "a pod CIDR", func(n *corev1.Node) bool { return n.Spec.PodCIDR != "" })
	cni := testenv.WriteCNIConfig(t, n.Spec.PodCIDR)
	cni.Install(t, confDir)
	a.waitReady(ctx, 60*time.Second)
	_, cidr, _ := net.ParseCIDR(n.Spec.PodCIDR)

	server := a.node + "-server"
	kubectl(t, a.env, podYAML(server, a.node, fmt.Sprintf(`  volumes: [{name: www, emptyDir: {}}]
  containers:
  - name: c
    image: %s
    volumeMounts: [{name: www, mountPath: /www}]
    command: ["sh", "-c", "/bin/busybox ip -4 addr show eth0; cat /etc/hosts; echo hello-from-server > /www/index.html; exec /bin/busybox httpd -f -p 8080 -h /www"]
`, testimage.Ref)), "apply", "-f", "-")
	sp := a.waitPod(ctx, server, 60*time.Second, "running with a pod IP", func(p *corev1.Pod) bool { return running(p) && p.Status.PodIP != "" })
	ip := net.ParseIP(sp.Status.PodIP)
	if ip == nil || !cidr.Contains(ip) || len(sp.Status.PodIPs) == 0 || sp.Status.PodIPs[0].IP != sp.Status.PodIP {
		t.Fatalf("server podIP %q podIPs %v, want an address in %s", sp.Status.PodIP, sp.Status.PodIPs, cidr)
	}
	a.waitLog(sp, "c", 0, "inet "+sp.Status.PodIP+"/")
	// The managed /etc/hosts names the pod's IP (kubelet_etc_hosts.go).
	a.waitLog(sp, "c", 0, sp.Status.PodIP+"\t"+server+"\n")

	client := a.node + "-client"
	kubectl(t, a.env, podYAML(client, a.node, fmt.Sprintf(`  restartPolicy: Never
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "i=0; while [ $i -lt 30 ]; do printf 'GET / HTTP/1.0\\r\\n\\r\\n' | /bin/busybox nc -w 2 %s 8080 | /bin/busybox grep -q hello-from-server && echo hello-from-server && exit 0; i=$((i+1)); sleep 1; done; exit 1"]
`, testimage.Ref, sp.Status.PodIP)), "apply", "-f", "-")
	cp := a.waitPod(ctx, client, 60*time.Second, "finished", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	if cp.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("the client could not reach the server at %s: phase %s, log:\n%s", sp.Status.PodIP, cp.Status.Phase, a.logOf(cp, "c", 0))
	}
	a.waitLog(cp, "c", 0, "hello-from-server")
	if cp.Status.PodIP == "" || cp.Status.PodIP == sp.Status.PodIP {
		t.Errorf("client podIP %q (server %q)", cp.Status.PodIP, sp.Status.PodIP)
	}

	// UDP from a third pod to the server pod. busybox has no UDP client or
	// server, so the test's own sockets stand in for the pods' processes,
	// each made inside its pod's network namespace (a socket stays in the
	// namespace it was created in): the datagrams cross the CNI network
	// between the two pods' interfaces, as the pods' own would.
	peer := a.node + "-peer"
	kubectl(t, a.env, podYAML(peer, a.node, fmt.Sprintf(`  containers:
  - name: c
    image: %s
    command: ["sleep", "3600"]
`, testimage.Ref)), "apply", "-f", "-")
	pp := a.waitPod(ctx, peer, 60*time.Second, "running with a pod IP", func(p *corev1.Pod) bool { return running(p) && p.Status.PodIP != "" })
	netnsDir := a.netnsDir()
	var srv net.PacketConn
	if err := netns.Do(filepath.Join(netnsDir, string(sp.UID)), func() (err error) {
		srv, err = net.ListenPacket("udp4", net.JoinHostPort(sp.Status.PodIP, "9090"))
		return err
	}); err != nil {
		t.Fatalf("UDP listener in the server pod's namespace: %v", err)
	}
	defer srv.Close()
	go func() { // echo, prefixed with the sender's address
		buf := make([]byte, 512)
		for {
			n, from, err := srv.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = srv.WriteTo(append([]byte(from.(*net.UDPAddr).IP.String()+" "), buf[:n]...), from)
		}
	}()
	var cli net.Conn
	if err := netns.Do(filepath.Join(netnsDir, string(pp.UID)), func() (err error) {
		cli, err = net.Dial("udp4", net.JoinHostPort(sp.Status.PodIP, "9090"))
		return err
	}); err != nil {
		t.Fatalf("UDP socket in the peer pod's namespace: %v", err)
	}
	defer cli.Close()
	buf := make([]byte, 512)
	var got string
	for i := 0; i < 10 && got == ""; i++ { // UDP may drop the first datagrams while ARP resolves
		if _, err := cli.Write([]byte("ping-udp")); err != nil {
			t.Fatal(err)
		}
		_ = cli.SetReadDeadline(time.Now().Add(time.Second))
		if n, err := cli.Read(buf); err == nil {
			got = string(buf[:n])
		}
	}
	if want := pp.Status.PodIP + " ping-udp"; got != want {
		t.Fatalf("UDP from pod %s to pod %s: got %q, want %q", pp.Status.PodIP, sp.Status.PodIP, got, want)
	}
}
