package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// TestPodNetworkCyclesLeaveNothingBehind: static pods on the CNI network
// (with hostPorts and bandwidth annotations, so that bridge, host-local,
// portmap and bandwidth all act) are created and removed in rounds; in
// some rounds the agent is killed with SIGKILL while pods are being set up
// or torn down, and started again. Afterwards nothing of the test's pods
// remains: no veth or ifb device, no host-local reservation, no network
// namespace, no iptables rule of the test's network, no CNI cache or
// pending record, no pod directory. Only the test's own resources are
// checked (other agents run on the host at the same time).
//
// NODEAGENT_CNI_CYCLES sets the number of pod cycles (default 30: a kill in setup and one in teardown; the
// issue's 200 with NODEAGENT_CNI_CYCLES=200).
func TestPodNetworkCyclesLeaveNothingBehind(t *testing.T) {
	t.Parallel()
	cycles := 30
	if s := os.Getenv("NODEAGENT_CNI_CYCLES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("NODEAGENT_CNI_CYCLES=%q: want a positive number", s)
		}
		cycles = n
	}
	const batch = 10 // pods at once
	manifests := t.TempDir()
	a := readyCNIAgent(t, "staticPodPath: "+manifests+"\n")
	netnsDir := a.netnsDir()
	cniDir := filepath.Join(a.rootDir(), "cni")
	podsDir := filepath.Join(a.rootDir(), "pods")
	ports := make([]int, batch)
	for i := range ports {
		ports[i] = freePort(t)
	}

	// Everything the pods' attachments made on the host, from the cache
	// records seen: host-side interfaces (veths, ifb devices).
	hostIfs := map[string]bool{}
	seen := map[string]bool{}
	record := func() int {
		files, _ := filepath.Glob(filepath.Join(cniDir, "results", "*-eth0"))
		for _, f := range files {
			if seen[f] {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				continue // being removed
			}
			var e cniCacheEntry
			if json.Unmarshal(b, &e) != nil {
				continue // being written
			}
			seen[f] = true
			for _, i := range e.Result.Interfaces {
				if i.Sandbox == "" && i.Name != a.cni.Bridge {
					hostIfs[i.Name] = true
				}
			}
		}
		return len(files)
	}
	entries := func(dir string) []string {
		es, _ := os.ReadDir(dir)
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		return names
	}
	restart := func(why string) {
		t.Helper()
		a.stop(syscall.SIGKILL)
		t.Logf("agent killed (SIGKILL) %s", why)
		a.start()
	}

	ctx := context.Background()
	start := time.Now()
	kills := 0
	for round := 0; round*batch < cycles; round++ {
		n := min(batch, cycles-round*batch)
		for i := range n {
			name := fmt.Sprintf("cyc%d-%d", round, i)
			writeFileAtomic(t, filepath.Join(manifests, name+".yaml"), fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: default
  annotations: {kubernetes.io/ingress-bandwidth: 10M, kubernetes.io/egress-bandwidth: 10M}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
    ports: [{containerPort: 80, hostPort: %d}]
`, name, testimage.Ref, ports[i]))
		}
		// Kill while pods are being set up (at various points of their
		// ADDs: after 0-900 ms).
		if round%3 == 1 {
			time.Sleep(time.Duration(round*300%1000) * time.Millisecond)
			kills++
			restart(fmt.Sprintf("in round %d while %d pods were being set up", round, n))
		}
		roundStart := time.Now()
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
			return record() >= n, nil
		})
		upTook := time.Since(roundStart)
		if err != nil {
			t.Fatalf("round %d: %d of %d pods attached to the network: %v\nagent log:\n%s", round, record(), n, err, a.out)
		}
		for i := range n {
			if err := os.Remove(filepath.Join(manifests, fmt.Sprintf("cyc%d-%d.yaml", round, i))); err != nil {
				t.Fatal(err)
			}
		}
		// Kill while pods are being torn down.
		if round%3 == 2 {
			time.Sleep(time.Duration(round*700%1500) * time.Millisecond)
			kills++
			restart(fmt.Sprintf("in round %d while %d pods were being torn down", round, n))
		}
		downStart := time.Now()
		err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
			record()
			return len(entries(podsDir)) == 0 && len(entries(filepath.Join(cniDir, "results"))) == 0 &&
				len(entries(filepath.Join(cniDir, "pending"))) == 0 && len(entries(netnsDir)) == 0, nil
		})
		if err != nil {
			t.Fatalf("round %d: pods not torn down: pods %v, CNI results %v, pending %v, netns %v\nagent log:\n%s", round,
				entries(podsDir), entries(filepath.Join(cniDir, "results")), entries(filepath.Join(cniDir, "pending")), entries(netnsDir), a.out)
		}
		t.Logf("round %d: up %v, down %v", round, upTook, time.Since(downStart))
	}
	elapsed := time.Since(start)
	t.Logf("%d pod create/delete cycles on the CNI network (%d at once, %d agent kills) in %v, %v per cycle",
		cycles, batch, kills, elapsed.Round(time.Millisecond), (elapsed / time.Duration(cycles)).Round(time.Millisecond))
	if len(seen) < cycles {
		t.Errorf("saw %d attachments, want %d", len(seen), cycles)
	}

	var left []string
	for name := range hostIfs {
		if _, err := net.InterfaceByName(name); err == nil {
			left = append(left, name)
		}
	}
	if brif := entries(filepath.Join("/sys/class/net", a.cni.Bridge, "brif")); len(brif) > 0 {
		left = append(left, brif...)
	}
	if len(left) > 0 {
		sort.Strings(left)
		t.Errorf("host interfaces of the pods left: %v", left)
	}
	var reserved []string
	for _, f := range entries(filepath.Join(a.cni.DataDir, a.cni.Name)) {
		if net.ParseIP(f) != nil {
			reserved = append(reserved, f)
		}
	}
	if len(reserved) > 0 {
		t.Errorf("host-local reservations left: %v", reserved)
	}
	for _, table := range []string{"nat", "filter", "mangle"} {
		out, err := exec.Command("iptables-save", "-t", table).Output()
		if err != nil {
			t.Fatalf("iptables-save -t %s: %v", table, err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			// Per-pod rules name the network (and the pod UID) in their
			// comments.
			if strings.Contains(l, a.cni.Name) {
				t.Errorf("iptables %s rule of the test's pods left: %s", table, l)
			}
		}
	}
	if es := entries(netnsDir); len(es) > 0 {
		t.Errorf("network namespaces left in %s: %v", netnsDir, es)
	}
}

// writeFileAtomic writes a file under a temporary name and renames it into
// place, so that a watcher never reads half a file.
func writeFileAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
