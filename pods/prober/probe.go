package prober

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodeagent/nodeagent/runtime"
)

// Kubelet's limits and identities for probes and hooks.
const (
	// maxOutput bounds what a probe or hook keeps of a command's output
	// or an HTTP body (kubelet: 10KB).
	maxOutput = 10 << 10
	// userAgentVersion is the Kubernetes minor version kubelet's probes
	// name in their User-Agent ("kube-probe/1.34").
	userAgentVersion = "1.34"
	// maxRedirects is where an HTTP probe stops following redirects.
	maxRedirects = 10
)

// Result is a probe's verdict.
type Result int8

const (
	// Unknown: no verdict yet (a startup probe before its first run).
	Unknown Result = iota
	Success
	Failure
)

func (r Result) String() string {
	switch r {
	case Success:
		return "Success"
	case Failure:
		return "Failure"
	}
	return "Unknown"
}

// outcome is one run of a probe handler: kubelet's probe.Result
// (success, warning, failure) with its output. err is set when the probe
// could not be run at all (kubelet's "probe errored").
type outcome struct {
	result  Result
	warning bool
	output  string
	err     error
}

// Execer runs a command in a running container and returns its exit code;
// *runtime.Runtime implements it.
type Execer interface {
	Exec(ctx context.Context, id string, o runtime.ExecOptions) (int, error)
}

// runner runs probe and hook handlers: commands in containers, HTTP
// requests, TCP connections and gRPC health checks. It is safe for
// concurrent use.
type runner struct {
	exec      Execer
	transport *http.Transport
}

func newRunner(e Execer) *runner {
	d := probeDialer()
	return &runner{
		exec: e,
		transport: &http.Transport{
			TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // kubelet's probes do not verify
			DisableKeepAlives:  true,
			Proxy:              nil,
			DisableCompression: true,
			DialContext:        d.DialContext,
		},
	}
}

// probeDialer closes connections with SO_LINGER 1s, as kubelet does, so
// that frequent probes do not fill the host with TIME_WAIT sockets.
func probeDialer() *net.Dialer {
	return &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			_ = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 1})
		})
	}}
}

// target is what a handler runs against.
type target struct {
	containerID string
	container   *v1.Container
	podIP       string
}

// probe runs one probe handler with the probe's timeout.
func (r *runner) probe(ctx context.Context, p *v1.Probe, t target) outcome {
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = time.Second
	}
	if p.Exec == nil && t.podIP == "" && !hasHost(p) {
		// Without a pod network the address would be the agent's own.
		return outcome{result: Unknown, err: errors.New("the pod has no IP")}
	}
	switch {
	case p.Exec != nil:
		return r.execProbe(ctx, t.containerID, p.Exec.Command, timeout)
	case p.HTTPGet != nil:
		req, err := httpRequest(ctx, p.HTTPGet, t, "probe")
		if err != nil {
			return outcome{result: Unknown, err: err}
		}
		return r.httpProbe(req, timeout)
	case p.TCPSocket != nil:
		port, err := resolvePort(p.TCPSocket.Port, t.container)
		if err != nil {
			return outcome{result: Unknown, err: err}
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = t.podIP
		}
		return tcpProbe(ctx, net.JoinHostPort(host, strconv.Itoa(port)), timeout)
	case p.GRPC != nil:
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		return grpcProbe(ctx, net.JoinHostPort(t.podIP, strconv.Itoa(int(p.GRPC.Port))), service, timeout)
	}
	return outcome{result: Unknown, err: errors.New("missing probe handler")}
}

func hasHost(p *v1.Probe) bool {
	return (p.HTTPGet != nil && p.HTTPGet.Host != "") || (p.TCPSocket != nil && p.TCPSocket.Host != "")
}

// execProbe runs a command in the container: exit code 0 is success, any
// other a failure with the command's output; a command still running at
// the timeout is a failure (kubelet's ExecProbeTimeout, on by default).
func (r *runner) execProbe(ctx context.Context, id string, cmd []string, timeout time.Duration) outcome {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := &limitBuffer{max: maxOutput}
	code, err := r.exec.Exec(ctx, id, runtime.ExecOptions{Cmd: cmd, Stdout: out, Stderr: out})
	switch {
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return outcome{result: Failure, output: fmt.Sprintf("command timed out: %q timed out after %s", strings.Join(cmd, " "), timeout)}
	case err != nil:
		return outcome{result: Unknown, err: err}
	case code != 0:
		return outcome{result: Failure, output: out.String()}
	}
	return outcome{result: Success, output: out.String()}
}

// httpRequest is kubelet's request for an httpGet action: scheme, host
// (default the pod IP), port by number or name, path, headers, and its
// User-Agent ("kube-<purpose>/1.34") and Accept unless set.
func httpRequest(ctx context.Context, a *v1.HTTPGetAction, t target, purpose string) (*http.Request, error) {
	scheme := strings.ToLower(string(a.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	host := a.Host
	if host == "" {
		host = t.podIP
	}
	port, err := resolvePort(a.Port, t.container)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(a.Path)
	if err != nil {
		u = &url.URL{Path: a.Path}
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	for _, x := range a.HTTPHeaders {
		h.Add(x.Name, x.Value)
	}
	if _, ok := h["User-Agent"]; !ok {
		h.Set("User-Agent", "kube-"+purpose+"/"+userAgentVersion)
	}
	if _, ok := h["Accept"]; !ok {
		h.Set("Accept", "*/*")
	} else if h.Get("Accept") == "" {
		h.Del("Accept")
	}
	req.Header = h
	req.Host = h.Get("Host")
	return req, nil
}

// httpProbe sends the request: 2xx is success, 3xx (a redirect to another
// host, which is not followed) a success with a warning, anything else a
// failure. Redirects to the same host are followed (at most 10).
func (r *runner) httpProbe(req *http.Request, timeout time.Duration) outcome {
	c := &http.Client{Timeout: timeout, Transport: r.transport, CheckRedirect: sameHostRedirects}
	res, err := c.Do(req)
	if err != nil {
		return outcome{result: Failure, output: err.Error()}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxOutput))
	if err != nil {
		return outcome{result: Failure, err: err}
	}
	switch {
	case res.StatusCode >= 200 && res.StatusCode < 300:
		return outcome{result: Success, output: string(b)}
	case res.StatusCode >= 300 && res.StatusCode < 400:
		return outcome{result: Success, warning: true, output: "Probe terminated redirects, Response body: " + string(b)}
	}
	return outcome{result: Failure, output: fmt.Sprintf("HTTP probe failed with statuscode: %d", res.StatusCode)}
}

func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

// tcpProbe succeeds when a TCP connection opens within the timeout.
func tcpProbe(ctx context.Context, addr string, timeout time.Duration) outcome {
	d := probeDialer()
	d.Timeout = timeout
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return outcome{result: Failure, output: err.Error()}
	}
	_ = conn.Close()
	return outcome{result: Success}
}

// grpcProbe calls grpc.health.v1.Health/Check for service: SERVING is
// success, anything else a failure (kubelet's messages).
func grpcProbe(ctx context.Context, addr, service string, timeout time.Duration) outcome {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := probeDialer()
	conn, err := grpc.DialContext(ctx, addr, //nolint:staticcheck // kubelet's blocking dial gives its connect errors
		grpc.WithUserAgent("kube-probe/"+userAgentVersion),
		grpc.WithBlock(), //nolint:staticcheck
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", a)
		}))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return outcome{result: Failure, output: fmt.Sprintf("timeout: failed to connect service %q within %v: %+v", addr, timeout, err)}
		}
		return outcome{result: Failure, output: fmt.Sprintf("error: failed to connect service at %q: %+v", addr, err)}
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		if st, ok := grpcstatus.FromError(err); ok {
			switch st.Code() {
			case codes.Unimplemented:
				return outcome{result: Failure, output: "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): " + st.Message()}
			case codes.DeadlineExceeded:
				return outcome{result: Failure, output: fmt.Sprintf("timeout: health rpc did not complete within %v", timeout)}
			}
		}
		return outcome{result: Failure, output: fmt.Sprintf("error: health rpc probe failed: %+v", err)}
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return outcome{result: Failure, output: fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String())}
	}
	return outcome{result: Success, output: "service healthy"}
}

// resolvePort is a probe's port: a number, or the name of one of the
// container's ports (or a number written as a string).
func resolvePort(p intstr.IntOrString, c *v1.Container) (int, error) {
	port := -1
	switch p.Type {
	case intstr.Int:
		port = p.IntValue()
	case intstr.String:
		found := false
		if c != nil {
			for _, cp := range c.Ports {
				if cp.Name == p.StrVal {
					port, found = int(cp.ContainerPort), true
					break
				}
			}
		}
		if !found {
			n, err := strconv.Atoi(p.StrVal)
			if err != nil {
				return -1, fmt.Errorf("port %s not found", p.StrVal)
			}
			port = n
		}
	}
	if port > 0 && port < 65536 {
		return port, nil
	}
	return port, fmt.Errorf("invalid port number: %v", port)
}

// limitBuffer keeps the first max bytes written to it, from concurrent
// writers (a command's stdout and stderr copiers).
type limitBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (b *limitBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *limitBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
