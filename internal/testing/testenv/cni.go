package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// CNIPluginDirs are where the reference CNI plugins are looked for: the
// upstream location and Debian's containernetworking-plugins package
// (installed by hack/ensure-deps.sh).
var CNIPluginDirs = []string{"/opt/cni/bin", "/usr/lib/cni"}

// CNINetwork is a bridge network written for one test, what an operator's
// CNI DaemonSet would install on a node: a conflist with bridge (with a
// gateway, IP masquerade and hairpin), host-local IPAM over the node's pod
// CIDR, portmap (hostPort) and, when the plugin exists, bandwidth.
type CNINetwork struct {
	ConfDir string   // holds 10-<Name>.conflist
	BinDirs []string // where the plugins are
	Name    string   // the CNI network name, unique per test
	Bridge  string   // the host bridge, unique per test
	Subnet  string   // the pod CIDR
	DataDir string   // host-local's reservations
	File    string   // the conflist
}

// CNIPlugins returns the plugin directories that exist, skipping the test
// when the reference plugins are missing (hack/ensure-deps.sh installs
// them).
func CNIPlugins(t testing.TB) []string {
	t.Helper()
	var dirs []string
	for _, d := range CNIPluginDirs {
		if _, err := os.Stat(filepath.Join(d, "bridge")); err == nil {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 {
		t.Skipf("no CNI plugins in %v: install Debian's containernetworking-plugins (hack/ensure-deps.sh)", CNIPluginDirs)
	}
	if os.Geteuid() != 0 {
		t.Skip("CNI plugins need root")
	}
	return dirs
}

// WriteCNIConfig writes a bridge network over podCIDR (a node's
// spec.podCIDR) into a new per-test configuration directory. The bridge
// and host-local's data are removed when the test ends; pods must be torn
// down by then.
func WriteCNIConfig(t testing.TB, podCIDR string) *CNINetwork {
	t.Helper()
	bins := CNIPlugins(t)
	if _, _, err := net.ParseCIDR(podCIDR); err != nil {
		t.Fatalf("WriteCNIConfig: %v", err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	dir := t.TempDir()
	n := &CNINetwork{
		ConfDir: filepath.Join(dir, "net.d"),
		BinDirs: bins,
		Name:    "natest-" + id,
		Bridge:  "nabr" + id, // at most 15 characters
		Subnet:  podCIDR,
		DataDir: filepath.Join(dir, "host-local"),
	}
	plugins := []any{
		map[string]any{
			"type": "bridge", "bridge": n.Bridge, "isGateway": true, "ipMasq": true, "hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": podCIDR}}},
				"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
				"dataDir": n.DataDir,
			},
		},
		map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}, "snat": true},
	}
	if HasCNIPlugin(bins, "bandwidth") {
		plugins = append(plugins, map[string]any{"type": "bandwidth", "capabilities": map[string]bool{"bandwidth": true}})
	}
	conf, err := json.MarshalIndent(map[string]any{"cniVersion": "1.0.0", "name": n.Name, "plugins": plugins}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(n.ConfDir, 0o755); err != nil {
		t.Fatal(err)
	}
	n.File = filepath.Join(n.ConfDir, "10-"+n.Name+".conflist")
	if err := os.WriteFile(n.File, conf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The bridge plugin never deletes its bridge.
		if out, err := exec.Command("ip", "link", "del", n.Bridge).CombinedOutput(); err != nil && linkExists(n.Bridge) {
			t.Logf("removing bridge %s: %v: %s", n.Bridge, err, out)
		}
	})
	return n
}

// Install copies the network's configuration into an agent's cniConfDir
// (created if missing) and returns the copy's path: the agent sees the
// network appear, as when an operator installs a CNI plugin.
func (n *CNINetwork) Install(t testing.TB, confDir string) string {
	t.Helper()
	conf, err := os.ReadFile(n.File)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(confDir, filepath.Base(n.File))
	if err := os.WriteFile(file, conf, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// HasCNIPlugin reports whether one of dirs holds the plugin name.
func HasCNIPlugin(dirs []string, name string) bool {
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			return true
		}
	}
	return false
}

func linkExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}

var (
	subnetMu   sync.Mutex
	subnetNext = mrand.IntN(256)
)

// TestPodCIDR returns a /24 for a test that runs a network without a
// cluster: in 10.245.0.0/16 (the local cluster allocates node CIDRs from
// 10.244.0.0/16), not overlapping any address of the host's interfaces.
func TestPodCIDR(t testing.TB) string {
	t.Helper()
	subnetMu.Lock()
	defer subnetMu.Unlock()
	for range 256 {
		x := subnetNext
		subnetNext = (subnetNext + 1) % 256
		cidr := fmt.Sprintf("10.245.%d.0/24", x)
		if !hostUses(cidr) {
			return cidr
		}
	}
	t.Fatal("no free /24 in 10.245.0.0/16")
	return ""
}

// hostUses reports whether an address of a host interface lies in cidr.
func hostUses(cidr string) bool {
	_, sub, _ := net.ParseCIDR(cidr)
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && (sub.Contains(ipn.IP) || ipn.Contains(sub.IP)) {
			return true
		}
	}
	return false
}
