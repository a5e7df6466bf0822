//go:build linux

package network

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/netns"
	"github.com/nodeagent/nodeagent/internal/testing/testenv"
)

// These tests run the reference plugins (bridge, host-local, portmap,
// bandwidth from Debian's containernetworking-plugins) against network
// namespaces they create. Traffic goes only to those namespaces and to
// loopback.

type fixture struct {
	t     *testing.T
	cni   *testenv.CNINetwork
	cache string
	nsDir string
	reg   *prometheus.Registry // for network(); nil = none
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	c := testenv.WriteCNIConfig(t, testenv.TestPodCIDR(t))
	dir := t.TempDir()
	return &fixture{t: t, cni: c, cache: filepath.Join(dir, "cni"), nsDir: filepath.Join(dir, "netns")}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// network returns a loaded Network: a new one is what the agent has after
// a restart.
func (f *fixture) network() *Network {
	f.t.Helper()
	cfg := Config{ConfDir: f.cni.ConfDir, BinDirs: f.cni.BinDirs, CacheDir: f.cache, Logger: testLogger(f.t)}
	if f.reg != nil {
		cfg.Registerer = f.reg
	}
	n, err := New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := n.Reload(context.Background()); err != nil {
		f.t.Fatalf("Reload: %v (%v)", err, errors.Unwrap(err))
	}
	return n
}

func (f *fixture) pod(name string) (PodRef, string) {
	f.t.Helper()
	uid := types.UID(fmt.Sprintf("%s-%d", name, time.Now().UnixNano()))
	path := filepath.Join(f.nsDir, string(uid))
	if err := netns.Create(path); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = netns.Remove(path) })
	return PodRef{Namespace: "default", Name: name, UID: uid}, path
}

// ifaceIPs are the global addresses of eth0 inside a namespace.
func ifaceIPs(t *testing.T, nsPath string) []net.IP {
	t.Helper()
	var ips []net.IP
	err := netns.Do(nsPath, func() error {
		ifc, err := net.InterfaceByName(IfName)
		if err != nil {
			return nil // no eth0: no addresses
		}
		addrs, err := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.IsGlobalUnicast() {
				ips = append(ips, ipn.IP)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ips
}

// listen opens a listener inside a namespace (the socket stays in it).
func listenIn(t *testing.T, nsPath, network, addr string) (ln net.Listener, pc net.PacketConn) {
	t.Helper()
	err := netns.Do(nsPath, func() error {
		var err error
		if network == "udp" {
			pc, err = net.ListenPacket("udp", addr)
		} else {
			ln, err = net.Listen("tcp", addr)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ln, pc
}

func dialIn(nsPath, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := netns.Do(nsPath, func() error {
		var err error
		c, err = net.DialTimeout(network, addr, 3*time.Second)
		return err
	})
	return c, err
}

// echoTCP answers one line per connection, prefixed with who.
func echoTCP(ln net.Listener, who string) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				line, err := bufio.NewReader(c).ReadString('\n')
				if err == nil {
					fmt.Fprintf(c, "%s:%s", who, line)
				}
			}()
		}
	}()
}

func roundTripTCP(t *testing.T, fromNS, addr, msg string) string {
	t.Helper()
	var c net.Conn
	var err error
	if fromNS == "" {
		c, err = net.DialTimeout("tcp", addr, 3*time.Second)
	} else {
		c, err = dialIn(fromNS, "tcp", addr)
	}
	if err != nil {
		t.Fatalf("dial %s from %q: %v", addr, fromNS, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "%s\n", msg)
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read from %s: %v", addr, err)
	}
	return strings.TrimSpace(string(b))
}

func TestPodsReachEachOther(t *testing.T) {
	f := newFixture(t)
	n := f.network()
	ctx := context.Background()
	podA, nsA := f.pod("a")
	podB, nsB := f.pod("b")
	hostPort := freeHostPort(t)

	resA, err := n.SetUp(ctx, podA, nsA, Options{PortMappings: []PortMapping{{HostPort: hostPort, ContainerPort: 8080, Protocol: "TCP"}}})
	if err != nil {
		t.Fatal(err)
	}
	resB, err := n.SetUp(ctx, podB, nsB, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = n.TearDown(ctx, podA, nsA)
		_ = n.TearDown(ctx, podB, nsB)
	})
	_, subnet, _ := net.ParseCIDR(f.cni.Subnet)
	for _, c := range []struct {
		res Result
		ns  string
	}{{resA, nsA}, {resB, nsB}} {
		if len(c.res.IPs) != 1 || !subnet.Contains(c.res.IPs[0]) {
			t.Fatalf("result IPs %v: want one address in %s", c.res.IPs, subnet)
		}
		if got := ifaceIPs(t, c.ns); len(got) != 1 || !got[0].Equal(c.res.IPs[0]) {
			t.Fatalf("eth0 in the pod has %v, the plugin returned %v", got, c.res.IPs)
		}
		if c.res.Network != f.cni.Name || c.res.File != f.cni.File || c.res.Cached {
			t.Fatalf("result %+v: want network %s from %s, not cached", c.res, f.cni.Name, f.cni.File)
		}
	}
	if resA.IPs[0].Equal(resB.IPs[0]) {
		t.Fatalf("both pods got %v", resA.IPs[0])
	}
	ipA, ipB := resA.IPs[0].String(), resB.IPs[0].String()

	// TCP both ways.
	lnA, _ := listenIn(t, nsA, "tcp", net.JoinHostPort(ipA, "8080"))
	defer lnA.Close()
	echoTCP(lnA, "a")
	lnB, _ := listenIn(t, nsB, "tcp", net.JoinHostPort(ipB, "8080"))
	defer lnB.Close()
	echoTCP(lnB, "b")
	if got := roundTripTCP(t, nsB, net.JoinHostPort(ipA, "8080"), "from-b"); got != "a:from-b" {
		t.Fatalf("b -> a over TCP: %q", got)
	}
	if got := roundTripTCP(t, nsA, net.JoinHostPort(ipB, "8080"), "from-a"); got != "b:from-a" {
		t.Fatalf("a -> b over TCP: %q", got)
	}

	// UDP b -> a, answered back.
	_, pcA := listenIn(t, nsA, "udp", net.JoinHostPort(ipA, "5353"))
	defer pcA.Close()
	go func() {
		buf := make([]byte, 64)
		for range 10 { // bounded
			_ = pcA.SetDeadline(time.Now().Add(10 * time.Second))
			k, from, err := pcA.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pcA.WriteTo(append([]byte("a:"), buf[:k]...), from)
		}
	}()
	uc, err := dialIn(nsB, "udp", net.JoinHostPort(ipA, "5353"))
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	got := ""
	for i := 0; i < 5 && got == ""; i++ { // UDP may lose the first datagram while ARP resolves
		_, _ = uc.Write([]byte("ping"))
		_ = uc.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 64)
		if k, err := uc.Read(buf); err == nil {
			got = string(buf[:k])
		}
	}
	if got != "a:ping" {
		t.Fatalf("b -> a over UDP: %q", got)
	}

	// hostPort on loopback reaches pod a's containerPort; so does the
	// hostPort on another host address (the test bridge's gateway).
	if got := roundTripTCP(t, "", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(hostPort))), "from-host"); got != "a:from-host" {
		t.Fatalf("hostPort %d on 127.0.0.1: %q", hostPort, got)
	}
	gw := subnet.IP.To4()
	gw = net.IPv4(gw[0], gw[1], gw[2], gw[3]+1)
	if got := roundTripTCP(t, "", net.JoinHostPort(gw.String(), strconv.Itoa(int(hostPort))), "via-gw"); got != "a:via-gw" {
		t.Fatalf("hostPort %d on the host address %s: %q", hostPort, gw, got)
	}

}

// TestCheck: CHECK passes for an attached pod and fails once its interface
// is gone. The network is bridge alone: Debian's portmap and bandwidth
// 1.1.1 fail CHECK (portmap looks for an IPv6 chain it never made,
// bandwidth dereferences nil without a limit).
func TestCheck(t *testing.T) {
	f := newFixture(t)
	f.onlyPlugins(t, "bridge")
	// Without IP masquerade: bridge 1.1.1's DEL finds the masquerade rule
	// through the addresses on eth0, so removing eth0 below would leak it.
	f.editConf(t, func(list map[string]any) { list["plugins"].([]any)[0].(map[string]any)["ipMasq"] = false })
	n := f.network()
	ctx := context.Background()
	pod, path := f.pod("check")
	if _, err := n.SetUp(ctx, pod, path, Options{}); err != nil {
		t.Fatal(err)
	}
	defer n.TearDown(ctx, pod, path)
	if err := n.Check(ctx, pod, path); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if out, err := exec.Command("nsenter", "--net="+path, "ip", "link", "del", IfName).CombinedOutput(); err != nil {
		t.Fatalf("deleting eth0 in the pod: %v: %s", err, out)
	}
	if err := n.Check(ctx, pod, path); err == nil {
		t.Fatal("Check passed for a pod without its interface")
	} else {
		t.Logf("Check without eth0: %v", err)
	}
	other, otherPath := f.pod("never-attached")
	if err := n.Check(ctx, other, otherPath); err == nil {
		t.Fatal("Check passed for a pod that was never attached")
	}
}

// editConf rewrites the test network's configuration.
func (f *fixture) editConf(t *testing.T, edit func(list map[string]any)) {
	t.Helper()
	conf, err := os.ReadFile(f.cni.File)
	if err != nil {
		t.Fatal(err)
	}
	var list map[string]any
	if err := json.Unmarshal(conf, &list); err != nil {
		t.Fatal(err)
	}
	edit(list)
	if conf, err = json.Marshal(list); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.cni.File, conf, 0o644); err != nil {
		t.Fatal(err)
	}
}

// onlyPlugins keeps the named plugins of the test network.
func (f *fixture) onlyPlugins(t *testing.T, types ...string) {
	f.editConf(t, func(list map[string]any) {
		var keep []any
		for _, p := range list["plugins"].([]any) {
			if slices.Contains(types, p.(map[string]any)["type"].(string)) {
				keep = append(keep, p)
			}
		}
		list["plugins"] = keep
	})
}

// freeHostPort is a TCP port nothing listens on now.
func freeHostPort(t *testing.T) int32 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return int32(ln.Addr().(*net.TCPAddr).Port)
}

// hostState is what pods could leave behind on the host.
// hostState is what the test's network has on the host: links are the
// bridge's ports (its brif), iptables the rules that name the test's network
// and the rules and declarations of the CNI- chains those rules jump to (not
// portmap's shared CNI-HOSTPORT-* chains). The host's other links and rules
// are left out: other tests and other agents on the machine change them
// meanwhile (a veth of another package's pod once failed a diff of every
// link).
type hostState struct {
	links    []string
	iptables []string
	reserved []string
	netns    []string
}

func snapshot(t *testing.T, f *fixture) hostState {
	t.Helper()
	var s hostState
	s.links = bridgePorts(t, f.cni.Bridge)
	for _, cmd := range []string{"iptables-save", "ip6tables-save"} {
		if _, err := exec.LookPath(cmd); err != nil {
			continue
		}
		out, err := exec.Command(cmd).Output()
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		var lines []string
		chains := map[string]bool{}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "#") || l == "" {
				continue
			}
			if strings.HasPrefix(l, ":") { // ":CHAIN POLICY [packets:bytes]"
				if i := strings.LastIndex(l, " ["); i > 0 {
					l = l[:i]
				}
			}
			lines = append(lines, l)
			if !strings.Contains(l, f.cni.Name) {
				continue
			}
			fs := strings.Fields(l)
			for j := 0; j+1 < len(fs); j++ {
				if (fs[j] == "-A" || fs[j] == "-j") && strings.HasPrefix(fs[j+1], "CNI-") && !strings.HasPrefix(fs[j+1], "CNI-HOSTPORT-") {
					chains[fs[j+1]] = true
				}
			}
		}
		for _, l := range lines {
			fs := strings.Fields(strings.TrimPrefix(l, ":"))
			own := strings.Contains(l, f.cni.Name) ||
				(len(fs) > 0 && strings.HasPrefix(l, ":") && chains[fs[0]]) ||
				(len(fs) > 1 && fs[0] == "-A" && chains[fs[1]])
			if own {
				s.iptables = append(s.iptables, cmd+" "+l)
			}
		}
	}
	entries, _ := os.ReadDir(filepath.Join(f.cni.DataDir, f.cni.Name))
	for _, e := range entries {
		if n := e.Name(); n != "lock" && !strings.HasPrefix(n, "last_reserved_ip") {
			s.reserved = append(s.reserved, n)
		}
	}
	entries, _ = os.ReadDir(f.nsDir)
	for _, e := range entries {
		s.netns = append(s.netns, e.Name())
	}
	slices.Sort(s.links)
	slices.Sort(s.iptables)
	return s
}

func diffLines(before, after []string) (added, removed []string) {
	for _, l := range after {
		if !slices.Contains(before, l) {
			added = append(added, l)
		}
	}
	for _, l := range before {
		if !slices.Contains(after, l) {
			removed = append(removed, l)
		}
	}
	return added, removed
}

func needTool(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("%s not installed (hack/ensure-deps.sh installs iptables with containernetworking-plugins)", n)
		}
	}
}

// cycle attaches a pod with a hostPort and a bandwidth limit and removes
// it again, namespace included.
// ownResources is what a test's attachments made on the host, noted while
// they exist: host-side interfaces (veths, ifb devices) from the CNI cache
// and iptables chains of rules naming the pod. Checking only these keeps
// the test right while other tests change the host's links and rules.
type ownResources struct {
	links  map[string]bool
	chains map[string]bool
}

func (o *ownResources) note(t *testing.T, f *fixture, uid types.UID) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(f.cache, "results", "*-"+string(uid)+"-"+IfName))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			Result struct {
				Interfaces []struct{ Name, Sandbox string }
			}
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, i := range rec.Result.Interfaces {
			if i.Sandbox == "" && i.Name != f.cni.Bridge {
				o.links[i.Name] = true
			}
		}
	}
	out, err := exec.Command("iptables-save", "-t", "nat").Output()
	if err != nil {
		t.Fatalf("iptables-save: %v", err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.Contains(l, string(uid)) {
			continue
		}
		fs := strings.Fields(l)
		for j := 0; j+1 < len(fs); j++ {
			if (fs[j] == "-A" || fs[j] == "-j") && strings.HasPrefix(fs[j+1], "CNI-") && !strings.HasPrefix(fs[j+1], "CNI-HOSTPORT-") {
				o.chains[fs[j+1]] = true
			}
		}
	}
}

// left reports the noted resources that still exist.
func (o *ownResources) left(t *testing.T) (links, chains []string) {
	t.Helper()
	for l := range o.links {
		if _, err := net.InterfaceByName(l); err == nil {
			links = append(links, l)
		}
	}
	out, err := exec.Command("iptables-save", "-t", "nat").Output()
	if err != nil {
		t.Fatalf("iptables-save: %v", err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if name, ok := strings.CutPrefix(l, ":"); ok {
			if fs := strings.Fields(name); len(fs) > 0 && o.chains[fs[0]] {
				chains = append(chains, fs[0])
			}
		}
	}
	slices.Sort(links)
	slices.Sort(chains)
	return links, chains
}

func cycle(t *testing.T, f *fixture, n *Network, i int, own *ownResources) {
	t.Helper()
	ctx := context.Background()
	pod := PodRef{Namespace: "default", Name: fmt.Sprintf("cycle-%d", i), UID: types.UID(fmt.Sprintf("cycle-%d-%d", i, time.Now().UnixNano()))}
	path := filepath.Join(f.nsDir, string(pod.UID))
	if err := netns.Create(path); err != nil {
		t.Fatal(err)
	}
	o := Options{
		PortMappings: []PortMapping{{HostPort: 40000 + int32(i%1000), ContainerPort: 80}},
		Bandwidth:    &Bandwidth{IngressRate: 10_000_000, EgressRate: 10_000_000},
	}
	if _, err := n.SetUp(ctx, pod, path, o); err != nil {
		t.Fatalf("cycle %d: %v", i, err)
	}
	if own != nil {
		own.note(t, f, pod.UID)
	}
	if err := n.TearDown(ctx, pod, path); err != nil {
		t.Fatalf("cycle %d: %v", i, err)
	}
	if err := n.TearDown(ctx, pod, path); err != nil { // idempotent
		t.Fatalf("cycle %d: second TearDown: %v", i, err)
	}
	if err := netns.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func TestCyclesLeaveNothingBehind(t *testing.T) {
	needTool(t, "iptables-save", "ip6tables-save")
	f := newFixture(t)
	n := f.network()
	cycles := 200
	if testing.Short() {
		cycles = 20
	}
	if s := os.Getenv("NODEAGENT_CNI_CYCLES"); s != "" {
		cycles, _ = strconv.Atoi(s)
	}
	// One cycle first: the bridge and portmap's shared chains
	// (CNI-HOSTPORT-*) are created once per host and stay, as with any
	// CNI runtime; everything per pod must go.
	cycle(t, f, n, 0, nil)
	// Only what the test's own pods made is checked: other tests (e2e
	// agents, other packages) change the host's links and rules meanwhile.
	own := &ownResources{links: map[string]bool{}, chains: map[string]bool{}}
	// A time budget as well: on a loaded machine a cycle takes seconds
	// (about 7 s at load 20), and 200 of them outlast the package's
	// timeout. What leaks, leaks per cycle: the minimum still shows it.
	budget, minCycles := 5*time.Minute, min(cycles, 20)
	start := time.Now()
	done := 0
	for i := 1; i <= cycles && (i <= minCycles || time.Since(start) < budget); i++ {
		cycle(t, f, n, i, own)
		done = i
	}
	if done < cycles {
		t.Logf("stopped after %d of %d cycles: the %v budget was spent", done, cycles, budget)
		cycles = done
	}
	elapsed := time.Since(start)
	t.Logf("%d ADD/DEL cycles (bridge+host-local+portmap+bandwidth) in %v, %v per cycle", cycles, elapsed.Round(time.Millisecond), (elapsed / time.Duration(cycles)).Round(time.Millisecond))
	after := snapshot(t, f)
	if len(own.links) < cycles || len(own.chains) == 0 {
		t.Errorf("noted %d host interfaces and %d iptables chains over %d cycles: the check would see nothing", len(own.links), len(own.chains), cycles)
	}
	links, chains := own.left(t)
	if len(links) > 0 {
		t.Errorf("host interfaces of the pods left: %v", links)
	}
	if len(chains) > 0 {
		t.Errorf("iptables chains of the pods left: %v", chains)
	}
	if brif, _ := os.ReadDir(filepath.Join("/sys/class/net", f.cni.Bridge, "brif")); len(brif) > 0 {
		t.Errorf("interfaces still on the test's bridge: %d", len(brif))
	}
	if len(after.reserved) > 0 {
		t.Errorf("host-local reservations left: %v", after.reserved)
	}
	if len(after.netns) > 0 {
		t.Errorf("network namespaces left: %v", after.netns)
	}
	for _, l := range after.iptables {
		if strings.Contains(l, f.cni.Name) {
			t.Errorf("iptables rule of the test network left: %s", l)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(f.cache, "results")); len(entries) > 0 {
		t.Errorf("CNI cache entries left: %d", len(entries))
	}
}

// TestTearDownAfterRestart: a new Network (an agent restart) finds the
// attachment in the cache: SetUp returns it without ADD, TearDown deletes
// it even after the configuration was removed.
func TestTearDownAfterRestart(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pod, path := f.pod("restart")
	res, err := f.network().SetUp(ctx, pod, path, Options{PortMappings: []PortMapping{{HostPort: freeHostPort(t), ContainerPort: 80, Protocol: "UDP"}}})
	if err != nil {
		t.Fatal(err)
	}
	veths := bridgePorts(t, f.cni.Bridge)

	n2 := f.network()
	if got, err := n2.Attached(); err != nil || len(got) != 1 || got[0] != pod.UID {
		t.Fatalf("Attached after a restart = %v, %v; want [%s]", got, err, pod.UID)
	}
	again, err := n2.SetUp(ctx, pod, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Cached || !slices.EqualFunc(again.IPs, res.IPs, net.IP.Equal) {
		t.Fatalf("SetUp after restart: %+v, want the cached %v", again, res.IPs)
	}
	if got := bridgePorts(t, f.cni.Bridge); !slices.Equal(got, veths) {
		t.Fatalf("SetUp after restart changed the veths: %v -> %v", veths, got)
	}

	if err := os.Remove(f.cni.File); err != nil {
		t.Fatal(err)
	}
	n3 := f.network2()
	if err := n3.Status(); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Status without configuration: %v", err)
	}
	if err := n3.TearDown(ctx, pod, path); err != nil {
		t.Fatal(err)
	}
	if s := snapshot(t, f); len(s.reserved) > 0 {
		t.Fatalf("host-local reservations left: %v", s.reserved)
	}
	if got := ifaceIPs(t, path); len(got) != 0 {
		t.Fatalf("eth0 still has %v after TearDown", got)
	}
	if err := n3.TearDown(ctx, pod, path); err != nil {
		t.Fatalf("second TearDown: %v", err)
	}
	if got, err := n3.Attached(); err != nil || len(got) != 0 {
		t.Fatalf("Attached after TearDown = %v, %v", got, err)
	}
}

// network2 is a Network that may have no usable configuration.
func (f *fixture) network2() *Network {
	f.t.Helper()
	n, err := New(Config{ConfDir: f.cni.ConfDir, BinDirs: f.cni.BinDirs, CacheDir: f.cache, Logger: testLogger(f.t)})
	if err != nil {
		f.t.Fatal(err)
	}
	_ = n.Reload(context.Background())
	return n
}

// bridgePorts lists the interfaces on the test's bridge (the pods' host-side
// veths), sorted; none while the bridge does not exist. Only the test's own:
// other tests and agents on the machine add and remove veths meanwhile.
func bridgePorts(t *testing.T, bridge string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join("/sys/class/net", bridge, "brif"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// TestInterruptedAdd: the agent died during ADD (the plugins ran, libcni
// never cached the result). After a restart SetUp deletes the attachment
// from the pending record before attaching again, and TearDown deletes a
// pending record whose ADD never ran.
func TestInterruptedAdd(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	n := f.network()
	pod, path := f.pod("crash")
	st := n.state.Load()
	rt := runtimeConf(pod, path, map[string]any{})
	if err := n.writePending(pod.UID, pending{Config: st.list.Bytes, NetNS: path, Args: rt.Args}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.cni.AddNetworkList(ctx, st.list, rt); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(f.cache, "results")); err != nil { // the crash came before the cache write
		t.Fatal(err)
	}
	if s := snapshot(t, f); len(s.reserved) != 1 {
		t.Fatalf("reservations after the interrupted ADD: %v", s.reserved)
	}

	n2 := f.network()
	res, err := n2.SetUp(ctx, pod, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s := snapshot(t, f); len(s.reserved) != 1 || s.reserved[0] != res.IPs[0].String() {
		t.Fatalf("reservations after SetUp: %v, want only %v", s.reserved, res.IPs)
	}
	if err := n2.TearDown(ctx, pod, path); err != nil {
		t.Fatal(err)
	}
	if s := snapshot(t, f); len(s.reserved) != 0 {
		t.Fatalf("reservations after TearDown: %v", s.reserved)
	}
	if _, err := os.Stat(n2.pendingPath(pod.UID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pending record left: %v", err)
	}

	if err := n.writePending(pod.UID, pending{Config: st.list.Bytes, NetNS: path, Args: rt.Args}); err != nil {
		t.Fatal(err)
	}
	if err := f.network().TearDown(ctx, pod, path); err != nil {
		t.Fatalf("TearDown of a pending record whose ADD never ran: %v", err)
	}
	if _, err := os.Stat(n2.pendingPath(pod.UID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pending record left: %v", err)
	}
}

// TestFailingPluginRollsBack: a plugin after bridge fails ADD; SetUp
// returns its error (not ErrNotReady) and DEL undoes bridge's work.
func TestFailingPluginRollsBack(t *testing.T) {
	f := newFixture(t)
	bin := t.TempDir()
	script := `#!/bin/sh
case "$CNI_COMMAND" in
VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0"]}' ;;
ADD) cat >/dev/null; echo '{"cniVersion":"1.0.0","code":999,"msg":"injected failure"}'; exit 1 ;;
*) cat >/dev/null ;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "failing"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// Last, so that bridge and host-local have done their part.
	f.editConf(t, func(list map[string]any) {
		list["plugins"] = append(list["plugins"].([]any), map[string]any{"type": "failing"})
	})
	f.cni.BinDirs = append([]string{bin}, f.cni.BinDirs...)
	f.reg = prometheus.NewRegistry()
	n := f.network()
	pod, path := f.pod("failing")
	veths := bridgePorts(t, f.cni.Bridge)
	_, err := n.SetUp(context.Background(), pod, path, Options{})
	if err == nil || errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "injected failure") || !strings.Contains(err.Error(), `type="failing"`) {
		t.Fatalf("SetUp with a failing plugin: %v", err)
	}
	t.Logf("error: %v", err)
	if s := snapshot(t, f); len(s.reserved) != 0 {
		t.Fatalf("reservations after the failed ADD: %v", s.reserved)
	}
	if got := bridgePorts(t, f.cni.Bridge); !slices.Equal(got, veths) {
		t.Fatalf("veths after the failed ADD: %v, before %v", got, veths)
	}
	if got := ifaceIPs(t, path); len(got) != 0 {
		t.Fatalf("eth0 has %v after the rolled-back ADD", got)
	}
	if got := testutil.ToFloat64(n.metrics.ops.WithLabelValues("add", "error")); got != 1 {
		t.Errorf("nodeagent_network_operations_total{add,error} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(n.metrics.ready); got != 1 {
		t.Errorf("nodeagent_network_ready = %v, want 1", got)
	}
	if c, err := testutil.GatherAndCount(f.reg, "nodeagent_network_operation_duration_seconds"); err != nil || c != 1 {
		t.Errorf("duration histograms: %d, %v", c, err)
	}
}

// TestConfigSelectionAndReload runs Run against a configuration directory
// the test edits: not ready while it is empty or only holds unusable
// files, the first usable file in lexical order wins, and removing it
// makes the network not ready again.
func TestConfigSelectionAndReload(t *testing.T) {
	f := newFixture(t)
	good, err := os.ReadFile(f.cni.File)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(f.cni.File); err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{ConfDir: f.cni.ConfDir, BinDirs: f.cni.BinDirs, CacheDir: f.cache, Logger: testLogger(t), ResyncPeriod: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	defer func() { cancel(); <-done }()

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (status %v, detail %q)", what, n.Status(), n.state.Load().detail)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	write := func(name string, b []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(f.cni.ConfDir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	current := func(file string) func() bool {
		return func() bool { _, got := n.Current(); return got == filepath.Join(f.cni.ConfDir, file) }
	}

	waitFor("the first scan", func() bool { return strings.Contains(n.state.Load().detail, "no network config found") })
	err = n.Status()
	if !errors.Is(err, ErrNotReady) || err.Error() != NotReadyMessage {
		t.Fatalf("Status = %v", err)
	}
	var nre *NotReadyError
	if !errors.As(err, &nre) || !strings.Contains(nre.Detail, "no network config found") {
		t.Fatalf("detail: %+v", nre)
	}

	// Unusable files: broken JSON, a missing plugin binary, no plugins.
	write("10-broken.conflist", []byte("{not json"))
	write("20-missing.conflist", bytes.Replace(good, []byte(`"type": "bridge"`), []byte(`"type": "no-such-plugin"`), 1))
	write("30-empty.conflist", []byte(`{"cniVersion":"1.0.0","name":"empty","plugins":[]}`))
	write("README.md", []byte("not a configuration"))
	waitFor("a detail naming the unusable files", func() bool {
		d := n.state.Load().detail
		return strings.Contains(d, "10-broken.conflist") && strings.Contains(d, "no-such-plugin") && strings.Contains(d, "30-empty.conflist")
	})
	if n.Status() == nil {
		t.Fatal("ready with only unusable configurations")
	}

	// A usable file after them is picked (fsnotify, not the hour-long resync).
	write("50-good.conflist", good)
	waitFor("50-good.conflist", current("50-good.conflist"))
	if n.Status() != nil {
		t.Fatal(n.Status())
	}
	// A usable file sorting earlier wins; a single-plugin .conf counts.
	single := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"single","type":"bridge","bridge":"%s","ipam":{"type":"host-local","ranges":[[{"subnet":"%s"}]],"dataDir":"%s"}}`, f.cni.Bridge, f.cni.Subnet, f.cni.DataDir)
	write("40-single.conf", []byte(single))
	waitFor("40-single.conf", current("40-single.conf"))
	if name, _ := n.Current(); name != "single" {
		t.Fatalf("network %q, want single", name)
	}
	// Removing the usable files makes the network not ready again.
	for _, name := range []string{"40-single.conf", "50-good.conflist"} {
		if err := os.Remove(filepath.Join(f.cni.ConfDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor("not ready after removing the configuration", func() bool { return n.Status() != nil })
	pod, path := f.pod("waits")
	if _, err := n.SetUp(context.Background(), pod, path, Options{}); !errors.Is(err, ErrNotReady) {
		t.Fatalf("SetUp while not ready: %v", err)
	}
}

// TestResyncWhileNotReady: plugins copied after their configuration (no
// event in the configuration directory) and a configuration directory
// that is removed and made again are picked up by the periodic rescan.
func TestResyncWhileNotReady(t *testing.T) {
	f := newFixture(t)
	late := t.TempDir()
	// The network needs a plugin that is not installed yet.
	f.editConf(t, func(list map[string]any) {
		list["plugins"] = append(list["plugins"].([]any), map[string]any{"type": "late"})
	})
	clk := testingclock.NewFakeClock(time.Now())
	n, err := New(Config{ConfDir: f.cni.ConfDir, BinDirs: append([]string{late}, f.cni.BinDirs...), CacheDir: f.cache, Logger: testLogger(t), Clock: clk, ResyncPeriod: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	defer func() { cancel(); <-done }()
	// stepUntil advances the fake clock by the resync period (once Run
	// waits on it) until cond holds.
	stepUntil := func(what string, cond func() bool) {
		t.Helper()
		for i := 0; !cond(); i++ {
			if i > 500 {
				t.Fatalf("timed out waiting for %s (detail %q)", what, n.state.Load().detail)
			}
			if clk.HasWaiters() {
				clk.Step(5 * time.Second)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	stepUntil("the first scan", func() bool { return strings.Contains(n.state.Load().detail, `"late"`) })

	script := "#!/bin/sh\ncase \"$CNI_COMMAND\" in VERSION) echo '{\"cniVersion\":\"1.0.0\",\"supportedVersions\":[\"1.0.0\"]}';; ADD) cat;; *) ;; esac\n"
	if err := os.WriteFile(filepath.Join(late, "late"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	stepUntil("ready once the plugin exists", func() bool { return n.Status() == nil })

	// The directory goes away (not ready), comes back with the
	// configuration: ready again, and watched again.
	conf, err := os.ReadFile(f.cni.File)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(f.cni.ConfDir); err != nil {
		t.Fatal(err)
	}
	stepUntil("not ready without the directory", func() bool { return n.Status() != nil })
	if err := os.MkdirAll(f.cni.ConfDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.cni.File, conf, 0o644); err != nil {
		t.Fatal(err)
	}
	stepUntil("ready with the directory back", func() bool { return n.Status() == nil })
	// Watched again: while ready there is no rescan, so only the watch
	// can see the removal (the clock moves by the debounce only).
	if err := os.Remove(f.cni.File); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for n.Status() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the removal was not seen without a rescan: the directory is not watched again")
		}
		if clk.HasWaiters() {
			clk.Step(watchDebounce)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConcurrentPods: pods set up and torn down at the same time get
// distinct addresses and leave no reservation.
func TestConcurrentPods(t *testing.T) {
	f := newFixture(t)
	n := f.network()
	ctx := context.Background()
	const pods = 8
	type podNS struct {
		ref  PodRef
		path string
	}
	var all []podNS
	for i := range pods {
		ref, path := f.pod(fmt.Sprintf("par-%d", i))
		all = append(all, podNS{ref, path})
	}
	ips := make([]string, pods)
	errs := make(chan error, pods)
	for i, p := range all {
		go func() {
			res, err := n.SetUp(ctx, p.ref, p.path, Options{})
			if err == nil {
				ips[i] = res.IPs[0].String()
			}
			errs <- err
		}()
	}
	for range pods {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for i, ip := range ips {
		if seen[ip] {
			t.Fatalf("address %s given twice: %v", ip, ips)
		}
		seen[ip] = true
		if got := ifaceIPs(t, all[i].path); len(got) != 1 || got[0].String() != ip {
			t.Fatalf("pod %d: eth0 has %v, SetUp returned %s", i, got, ip)
		}
	}
	for _, p := range all {
		go func() { errs <- n.TearDown(ctx, p.ref, p.path) }()
	}
	for range pods {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if s := snapshot(t, f); len(s.reserved) != 0 {
		t.Fatalf("reservations left: %v", s.reserved)
	}
}

// TestDualStack: with an IPv4 and an IPv6 range the result holds both
// addresses, the ones on eth0, and PodIPs orders them by the node's
// family. (No gateway: the bridge plugin would turn on IPv6 forwarding on
// the test host.)
func TestDualStack(t *testing.T) {
	f := newFixture(t)
	var b [2]byte
	_, _ = rand.Read(b[:])
	v6 := fmt.Sprintf("fd4e:a6e7:%x::/64", b)
	f.editConf(t, func(list map[string]any) {
		br := list["plugins"].([]any)[0].(map[string]any)
		br["isGateway"], br["ipMasq"] = false, false
		ipam := br["ipam"].(map[string]any)
		ipam["ranges"] = append(ipam["ranges"].([]any), []any{map[string]any{"subnet": v6}})
		delete(ipam, "routes")
	})
	n := f.network()
	ctx := context.Background()
	podA, nsA := f.pod("dual-a")
	podB, nsB := f.pod("dual-b")
	resA, err := n.SetUp(ctx, podA, nsA, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.TearDown(ctx, podA, nsA)
	if _, err := n.SetUp(ctx, podB, nsB, Options{}); err != nil {
		t.Fatal(err)
	}
	defer n.TearDown(ctx, podB, nsB)
	if len(resA.IPs) != 2 || resA.IPs[0].To4() == nil || resA.IPs[1].To4() != nil {
		t.Fatalf("result IPs %v: want an IPv4 and an IPv6 address", resA.IPs)
	}
	got := ifaceIPs(t, nsA)
	if len(got) != 2 || !slices.ContainsFunc(got, resA.IPs[0].Equal) || !slices.ContainsFunc(got, resA.IPs[1].Equal) {
		t.Fatalf("eth0 has %v, the plugin returned %v", got, resA.IPs)
	}
	if got := PodIPs(resA.IPs, net.ParseIP("2001:db8::1")); len(got) != 2 || got[0] != resA.IPs[1].String() {
		t.Fatalf("PodIPs for an IPv6 node: %v", got)
	}
	// TCP over IPv6 between the pods.
	ln, _ := listenIn(t, nsA, "tcp", net.JoinHostPort(resA.IPs[1].String(), "8080"))
	defer ln.Close()
	echoTCP(ln, "a6")
	if got := roundTripTCP(t, nsB, net.JoinHostPort(resA.IPs[1].String(), "8080"), "from-b"); got != "a6:from-b" {
		t.Fatalf("b -> a over IPv6: %q", got)
	}
}

// TestSetUpInRecreatedNamespace: the namespace at the recorded path was
// replaced (a reboot empties /run, the worker makes it again): SetUp does
// not trust the record, it deletes the stale attachment and adds again.
func TestSetUpInRecreatedNamespace(t *testing.T) {
	f := newFixture(t)
	// Without IP masquerade: bridge 1.1.1 finds a pod's masquerade rule
	// through eth0's addresses, so the DEL of the vanished namespace's
	// attachment leaves it, and the same chain name (network + container
	// ID) then fails the final DEL. (A real reboot clears iptables too.)
	f.editConf(t, func(list map[string]any) { list["plugins"].([]any)[0].(map[string]any)["ipMasq"] = false })
	ctx := context.Background()
	n := f.network()
	pod, path := f.pod("reboot")
	if _, err := n.SetUp(ctx, pod, path, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := netns.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := netns.Create(path); err != nil {
		t.Fatal(err)
	}
	res, err := f.network().SetUp(ctx, pod, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Cached {
		t.Fatal("SetUp returned the stale record for a new namespace")
	}
	if got := ifaceIPs(t, path); len(got) != 1 || !got[0].Equal(res.IPs[0]) {
		t.Fatalf("eth0 in the new namespace has %v, SetUp returned %v", got, res.IPs)
	}
	if s := snapshot(t, f); len(s.reserved) != 1 {
		t.Fatalf("reservations: %v, want only the new address", s.reserved)
	}
	if err := n.TearDown(ctx, pod, path); err != nil {
		t.Fatal(err)
	}
}

// TestKilledDuringAdd: the process running SetUp is killed (SIGKILL)
// while the last plugin of the network runs, after bridge, host-local and
// portmap did their part. A new Network (the restarted agent) tears the
// pod down from the pending record: no reservation, veth or iptables rule
// is left.
func TestKilledDuringAdd(t *testing.T) {
	if os.Getenv("NETWORK_TEST_CHILD") != "" {
		t.Skip("child")
	}
	needTool(t, "iptables-save", "ip6tables-save")
	f := newFixture(t)
	bin := t.TempDir()
	started := filepath.Join(bin, "started")
	script := fmt.Sprintf(`#!/bin/sh
case "$CNI_COMMAND" in
VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["1.0.0"]}' ;;
ADD) cat >/dev/null; touch %s; sleep 30 ;;
*) cat >/dev/null ;;
esac
`, started)
	if err := os.WriteFile(filepath.Join(bin, "slow"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	f.editConf(t, func(list map[string]any) {
		list["plugins"] = append(list["plugins"].([]any), map[string]any{"type": "slow"})
	})
	f.cni.BinDirs = append([]string{bin}, f.cni.BinDirs...)
	// One attachment first, so that portmap's shared chains exist before
	// the snapshot.
	warm, warmPath := f.pod("warm")
	f.onlyPluginsTemp(t, func() {
		n2 := f.network()
		if _, err := n2.SetUp(context.Background(), warm, warmPath, Options{PortMappings: []PortMapping{{HostPort: 1, ContainerPort: 1}}}); err != nil {
			t.Fatal(err)
		}
		if err := n2.TearDown(context.Background(), warm, warmPath); err != nil {
			t.Fatal(err)
		}
	})
	before := snapshot(t, f)

	pod, path := f.pod("killed")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledDuringAddChild$", "-test.v")
	cmd.Env = append(os.Environ(), "NETWORK_TEST_CHILD=1", "NODEAGENT_SKIP_CLUSTER=1",
		"CHILD_CONF="+f.cni.ConfDir, "CHILD_BINS="+strings.Join(f.cni.BinDirs, ","), "CHILD_CACHE="+f.cache,
		"CHILD_NETNS="+path, "CHILD_UID="+string(pod.UID))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("the last plugin never ran:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if s := snapshot(t, f); len(s.reserved) != 1 {
		t.Fatalf("reservations after the kill: %v (child output:\n%s)", s.reserved, out.String())
	}
	if got, err := f.network().Attached(); err != nil || len(got) != 1 || got[0] != pod.UID {
		t.Fatalf("Attached after the kill = %v, %v; want the killed pod", got, err)
	}
	if len(bridgePorts(t, f.cni.Bridge)) == 0 {
		t.Fatal("no veth after the kill: the plugins before the last did not run")
	}

	if err := f.network().TearDown(context.Background(), pod, path); err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, f)
	if a, r := diffLines(before.links, after.links); len(a)+len(r) > 0 {
		t.Errorf("links changed: added %v, removed %v", a, r)
	}
	if a, r := diffLines(before.iptables, after.iptables); len(a)+len(r) > 0 {
		t.Errorf("iptables changed:\nadded:\n%s\nremoved:\n%s", strings.Join(a, "\n"), strings.Join(r, "\n"))
	}
	if len(after.reserved) != 0 {
		t.Errorf("reservations left: %v", after.reserved)
	}
}

// TestKilledDuringAddChild is TestKilledDuringAdd's agent: it runs SetUp
// and is killed during it.
func TestKilledDuringAddChild(t *testing.T) {
	if os.Getenv("NETWORK_TEST_CHILD") == "" {
		t.Skip("run by TestKilledDuringAdd")
	}
	n, err := New(Config{ConfDir: os.Getenv("CHILD_CONF"), BinDirs: strings.Split(os.Getenv("CHILD_BINS"), ","), CacheDir: os.Getenv("CHILD_CACHE")})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	pod := PodRef{Namespace: "default", Name: "killed", UID: types.UID(os.Getenv("CHILD_UID"))}
	_, err = n.SetUp(context.Background(), pod, os.Getenv("CHILD_NETNS"), Options{PortMappings: []PortMapping{{HostPort: 2, ContainerPort: 2}}})
	t.Fatalf("SetUp returned (%v); it should have been killed", err)
}

// onlyPluginsTemp runs fn with the test network's "slow" plugin left out.
func (f *fixture) onlyPluginsTemp(t *testing.T, fn func()) {
	conf, err := os.ReadFile(f.cni.File)
	if err != nil {
		t.Fatal(err)
	}
	f.editConf(t, func(list map[string]any) {
		var keep []any
		for _, p := range list["plugins"].([]any) {
			if p.(map[string]any)["type"] != "slow" {
				keep = append(keep, p)
			}
		}
		list["plugins"] = keep
	})
	fn()
	if err := os.WriteFile(f.cni.File, conf, 0o644); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkSetUpTearDown measures ADD and DEL of one pod (with a hostPort)
// on the test network (bridge, host-local, portmap, bandwidth) and on
// bridge and host-local alone.
//
//	go test -run XXX -bench SetUpTearDown -benchtime 50x ./network
func BenchmarkSetUpTearDown(b *testing.B) {
	for _, v := range []struct {
		name    string
		plugins []string
	}{
		{"full", nil},
		{"bridge-only", []string{"bridge"}},
	} {
		b.Run(v.name, func(b *testing.B) {
			c := testenv.WriteCNIConfig(b, testenv.TestPodCIDR(b))
			if v.plugins != nil {
				conf, err := os.ReadFile(c.File)
				if err != nil {
					b.Fatal(err)
				}
				var list map[string]any
				if err := json.Unmarshal(conf, &list); err != nil {
					b.Fatal(err)
				}
				var keep []any
				for _, p := range list["plugins"].([]any) {
					if slices.Contains(v.plugins, p.(map[string]any)["type"].(string)) {
						keep = append(keep, p)
					}
				}
				list["plugins"] = keep
				conf, _ = json.Marshal(list)
				if err := os.WriteFile(c.File, conf, 0o644); err != nil {
					b.Fatal(err)
				}
			}
			benchSetUpTearDown(b, c)
		})
	}
}

func benchSetUpTearDown(b *testing.B, c *testenv.CNINetwork) {
	dir := b.TempDir()
	n, err := New(Config{ConfDir: c.ConfDir, BinDirs: c.BinDirs, CacheDir: filepath.Join(dir, "cni"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	if err := n.Reload(context.Background()); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var add, del time.Duration
	for i := 0; i < b.N; i++ {
		pod := PodRef{Namespace: "default", Name: "bench", UID: types.UID(fmt.Sprintf("bench-%d-%d", i, time.Now().UnixNano()))}
		path := filepath.Join(dir, "netns", string(pod.UID))
		if err := netns.Create(path); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := n.SetUp(ctx, pod, path, Options{PortMappings: []PortMapping{{HostPort: 40000, ContainerPort: 80}}}); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if err := n.TearDown(ctx, pod, path); err != nil {
			b.Fatal(err)
		}
		add, del = add+mid.Sub(start), del+time.Since(mid)
		if err := netns.Remove(path); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(add.Milliseconds())/float64(b.N), "ms-setup/op")
	b.ReportMetric(float64(del.Milliseconds())/float64(b.N), "ms-teardown/op")
}
