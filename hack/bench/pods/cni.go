package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// modeCNI is the event-driven PLEG with pod networking through CNI: the
// reference plugins' bridge network over the node's pod CIDR, what a
// network provider installs (docs/networking.md), so that its pod start
// latency shows what CNI ADD/DEL add to the event-driven mode's.
const modeCNI = "cni"

// cniBinDirs are where the reference plugins are looked for (upstream's
// location and Debian's containernetworking-plugins).
var cniBinDirs = []string{"/opt/cni/bin", "/usr/lib/cni"}

// cniConfig is the agent's configuration for modeCNI.
func (a *agentProc) cniConfig() string {
	return fmt.Sprintf("cniConfDir: %s\ncniBinDir: %s\n", filepath.Join(a.dir, "net.d"), strings.Join(cniBinDirs, ","))
}

// cniBridge is modeCNI's bridge (at most 15 characters).
func (b *bench) cniBridge() string {
	id := b.runID
	if len(id) > 8 {
		id = id[len(id)-8:]
	}
	return "nabp" + id
}

// installCNI waits for the node's pod CIDR (kube-controller-manager
// allocates it) and writes a bridge + host-local + portmap + bandwidth
// network over it into the agent's cniConfDir, as a network provider's
// DaemonSet would.
func (b *bench) installCNI(ctx context.Context, a *agentProc) error {
	var cidr string
	deadline := time.Now().Add(2 * time.Minute)
	for cidr == "" {
		n, err := b.admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
		if err == nil {
			cidr = n.Spec.PodCIDR
		}
		if cidr != "" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s has no pod CIDR after 2m (does kube-controller-manager allocate node CIDRs?)", a.node)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	found := false
	for _, d := range cniBinDirs {
		if _, err := os.Stat(filepath.Join(d, "bridge")); err == nil {
			found = true
		}
	}
	if !found {
		return fmt.Errorf("no CNI plugins in %v: install containernetworking-plugins", cniBinDirs)
	}
	conf, err := json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0",
		"name":       "bench-pods-" + b.runID,
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": b.cniBridge(), "isGateway": true, "ipMasq": true, "hairpinMode": true,
				"ipam": map[string]any{
					"type": "host-local", "ranges": [][]map[string]string{{{"subnet": cidr}}},
					"routes": []map[string]string{{"dst": "0.0.0.0/0"}}, "dataDir": filepath.Join(a.dir, "host-local"),
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}, "snat": true},
			map[string]any{"type": "bandwidth", "capabilities": map[string]bool{"bandwidth": true}},
		},
	}, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Join(a.dir, "net.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(dir, ".10-bench.conflist.tmp")
	if err := os.WriteFile(tmp, conf, 0o644); err != nil {
		return err
	}
	progress("%s: CNI network over %s, bridge %s", a.mode, cidr, b.cniBridge())
	return os.Rename(tmp, filepath.Join(dir, "10-bench.conflist"))
}

// removeCNIBridge deletes modeCNI's bridge (the bridge plugin never does).
func (b *bench) removeCNIBridge() {
	if out, err := exec.Command("ip", "link", "del", b.cniBridge()).CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot find device") {
		fmt.Fprintf(os.Stderr, "cleanup: removing bridge %s: %v: %s\n", b.cniBridge(), err, out)
	}
}
