package e2e

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/testing/testenv"
)

// plainGet requests url over plain HTTP without credentials.
func plainGet(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// listeningPorts are the TCP ports the process pid listens on: its socket
// descriptors matched with the LISTEN sockets of /proc/net/tcp and tcp6.
func listeningPorts(t *testing.T, pid int) []int {
	t.Helper()
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join(fdDir, e.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	var ports []int
	for _, f := range []string{"tcp", "tcp6"} {
		fh, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Scan() // header
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || fs[3] != "0A" || !inodes[fs[9]] {
				continue
			}
			_, portHex, _ := strings.Cut(fs[1], ":")
			b, err := hex.DecodeString(portHex)
			if err != nil || len(b) != 2 {
				t.Fatalf("%s: local address %q", f, fs[1])
			}
			ports = append(ports, int(b[0])<<8|int(b[1]))
		}
		fh.Close()
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// kubelet's readOnlyPort: the agent serves, besides its authenticated node
// API, a plain-HTTP server on address:readOnlyPort that answers anyone
// /pods, /metrics and /healthz, and answers kubelet's debugging paths with
// 405 "Debug endpoints are disabled." (no exec, container logs, run or
// pprof without authentication), /configz 404. With enableServer false
// only the read-only server listens, and the Node still advertises port,
// as kubelet's; with readOnlyPort 0 (the default) it does not listen.
func TestReadOnlyPort(t *testing.T) {
	t.Parallel()
	env := testenv.Cluster(t)
	ctx := context.Background()
	roPort, bROPort := freePort(t), freePort(t)
	a := newAgent(t, env, agentOpts{noRuntime: true, config: fmt.Sprintf("readOnlyPort: %d\n", roPort)})
	b := newAgent(t, env, agentOpts{noRuntime: true, config: fmt.Sprintf("enableServer: false\nreadOnlyPort: %d\n", bROPort)})
	c := newAgent(t, env, agentOpts{noRuntime: true}) // defaults: readOnlyPort 0
	a.start()
	b.start()
	c.start()
	a.waitKubeletPort(ctx)
	b.waitKubeletPort(ctx) // advertised all the same
	c.waitKubeletPort(ctx)
	base := "http://127.0.0.1:" + strconv.Itoa(roPort)

	code, body := plainGet(t, "GET", base+"/pods")
	if code != http.StatusOK || !strings.Contains(body, `"kind":"PodList"`) {
		t.Errorf("GET /pods = %d %q, want 200 with a PodList", code, body)
	}
	code, body = plainGet(t, "GET", base+"/metrics")
	if code != http.StatusOK || !strings.Contains(body, "# TYPE ") {
		t.Errorf("GET /metrics = %d, want 200 with metrics; body starts %.200q", code, body)
	}
	if code, body := plainGet(t, "GET", base+"/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("GET /healthz = %d %q, want 200 ok", code, body)
	}
	for _, r := range [][2]string{
		{"POST", "/exec/default/p/c?command=id&output=1"}, {"POST", "/run/default/p/c?cmd=id"},
		{"GET", "/containerLogs/default/p/c"}, {"GET", "/debug/pprof/heap"}, {"POST", "/portForward/default/p"},
	} {
		if code, body := plainGet(t, r[0], base+r[1]); code != http.StatusMethodNotAllowed || strings.TrimSpace(body) != "Debug endpoints are disabled." {
			t.Errorf("%s %s = %d %q, want 405 Debug endpoints are disabled.", r[0], r[1], code, body)
		}
	}
	if code, body := plainGet(t, "GET", base+"/configz"); code != http.StatusNotFound {
		t.Errorf("GET /configz = %d %q, want 404", code, body)
	}
	// The authenticated node API still refuses a request without
	// credentials.
	if code, _ := a.nodeGet(t, a.nodeClient(t, nil), "/pods", ""); code != http.StatusUnauthorized {
		t.Errorf("node API: GET /pods without credentials = %d, want 401", code)
	}
	// enableServer false: the read-only server alone.
	if code, body := plainGet(t, "GET", "http://127.0.0.1:"+strconv.Itoa(bROPort)+"/pods"); code != http.StatusOK || !strings.Contains(body, `"kind":"PodList"`) {
		t.Errorf("enableServer false: GET /pods on readOnlyPort = %d %q, want 200 with a PodList", code, body)
	}
	if conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(b.apiPort)), 5*time.Second); err == nil {
		conn.Close()
		t.Errorf("enableServer false: port %d accepts connections", b.apiPort)
	}

	healthzPort := func(x *agent) int {
		p, err := strconv.Atoi(x.healthURL[strings.LastIndex(x.healthURL, ":")+1:])
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		x    *agent
		want []int
	}{
		{"readOnlyPort set", a, []int{healthzPort(a), a.apiPort, roPort}},
		{"enableServer false", b, []int{healthzPort(b), bROPort}},
		{"readOnlyPort 0", c, []int{healthzPort(c), c.apiPort}},
	} {
		slices.Sort(tc.want)
		if got := listeningPorts(t, tc.x.cmd.Process.Pid); !slices.Equal(got, tc.want) {
			t.Errorf("%s: the agent listens on %v, want %v", tc.name, got, tc.want)
		}
	}
}
