package main

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/config"
	"github.com/nodeagent/nodeagent/heartbeat"
	"github.com/nodeagent/nodeagent/internal/pki"
)

// fakeAPIServer answers the few requests the tests below make (a Pod, an
// Event, a Node, a Lease), each object named after the client
// certificate's CN ("anonymous" without one), and records the requests.
type fakeAPIServer struct {
	mu   sync.Mutex
	reqs []apiRequest
}

type apiRequest struct {
	method, path, accept, contentType string
}

func (s *fakeAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	s.reqs = append(s.reqs, apiRequest{r.Method, r.URL.Path, r.Header.Get("Accept"), r.Header.Get("Content-Type")})
	s.mu.Unlock()
	name := "anonymous"
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		name = r.TLS.PeerCertificates[0].Subject.CommonName
	}
	var kind, ns, group = "", "", "v1"
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces/default/pods/p":
		kind, ns = "Pod", "default"
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/namespaces/default/events":
		kind, ns = "Event", "default"
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/nodes/n":
		kind = "Node"
	case r.Method == http.MethodGet && r.URL.Path == "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n":
		kind, ns, group = "Lease", "kube-node-lease", "coordination.k8s.io/v1"
	default:
		http.Error(w, "unexpected request", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"kind":%q,"apiVersion":%q,"metadata":{"name":%q,"namespace":%q}}`, kind, group, name, ns)
}

// count is the number of requests to path so far.
func (s *fakeAPIServer) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.reqs {
		if r.path == path {
			n++
		}
	}
	return n
}

// first is the first request to path.
func (s *fakeAPIServer) first(path string) apiRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.reqs {
		if r.path == path {
			return r
		}
	}
	return apiRequest{}
}

// agentClients builds the agent's clients as newAgent does (newAPIClients,
// newKubeClients) from cfg, with a kubeconfig naming srv.
func agentClients(t *testing.T, srv *httptest.Server, cfg *config.NodeAgentConfiguration) *kubeClients {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Kubeconfig = kubeconfig
	if errs, _ := config.Validate(cfg); len(errs) > 0 {
		t.Fatalf("invalid test configuration: %v", errs)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	clients, err := newAPIClients(cfg, "n", heartbeat.RenewInterval(40*time.Second), log, clock.RealClock{}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	kc, err := newKubeClients(cfg, clients, "nodeagent/test")
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

func newEvent() *corev1.Event {
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "default"}, Reason: "Test"}
}

// The main client applies kubeAPIQPS/kubeAPIBurst; Events go through a
// limiter of their own (eventRecordQPS 0: client-go's 5 per second, as in
// kubelet, not "no limit"), which a main client with a queue does not
// delay; node status and Lease requests are not limited. Real HTTP on
// 127.0.0.1.
func TestAgentClientsApplyTheConfiguredRates(t *testing.T) {
	api := &fakeAPIServer{}
	srv := httptest.NewServer(api)
	defer srv.Close()
	cfg := config.Default()
	cfg.KubeAPIQPS, cfg.KubeAPIBurst = 2, 2
	cfg.EventRecordQPS, cfg.EventBurst = 0, 1
	kc := agentClients(t, srv, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// 8 pod reads at once at 2 per second, burst 2: the last one starts
	// 3 s after the first.
	const podPath = "/api/v1/namespaces/default/pods/p"
	start := time.Now()
	var wg sync.WaitGroup
	mainErrs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := kc.main.Pods("default").Get(ctx, "p", metav1.GetOptions{})
			mainErrs <- err
		}()
	}
	// Once the burst is through, the other 6 wait on the main limiter.
	for deadline := time.Now().Add(30 * time.Second); api.count(podPath) < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the main client's first requests never arrived")
		}
	}
	time.Sleep(50 * time.Millisecond) // for the 6 others to queue

	// 6 Events meanwhile: the first at once (had it shared the main
	// limiter it would come after the 6 queued reads, ≥ 2.5 s), then one
	// each 200 ms (5 per second, burst 1).
	evStart := time.Now()
	var firstEvent time.Duration
	for i := range 6 {
		if _, err := kc.events.Events().Create(newEvent()); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if i == 0 {
			firstEvent = time.Since(evStart)
		}
	}
	events := time.Since(evStart)
	// Node status and Lease reads while the main limiter is still busy:
	// unlimited (at 2 per second, 40 would take 20 s).
	stStart := time.Now()
	for range 20 {
		if _, err := kc.status.Nodes().Get(ctx, "n", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := kc.heartbeat.Leases("kube-node-lease").Get(ctx, "n", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	unlimited := time.Since(stStart)
	wg.Wait()
	mainTook := time.Since(start)
	close(mainErrs)
	for err := range mainErrs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("8 main reads took %s; 6 events %s (the first %s); 40 node status and Lease reads %s", mainTook, events, firstEvent, unlimited)
	if mainTook < 2800*time.Millisecond {
		t.Errorf("8 main reads at kubeAPIQPS 2, kubeAPIBurst 2 took %s, want at least 3s", mainTook)
	}
	if events < 900*time.Millisecond {
		t.Errorf("6 events at eventRecordQPS 0 (client-go's 5 per second), eventBurst 1 took %s, want at least 1s", events)
	}
	if firstEvent > 1500*time.Millisecond {
		t.Errorf("the first event took %s behind the main client's queue; its limiter must be its own", firstEvent)
	}
	if unlimited > 5*time.Second {
		t.Errorf("40 node status and Lease reads took %s; they must not be rate-limited", unlimited)
	}
}

// contentType reaches every client, as kubelet's setContentTypeForClient
// sets it: protobuf requests accepting protobuf or JSON answers, or JSON.
func TestAgentClientsUseTheContentType(t *testing.T) {
	for _, tc := range []struct {
		contentType, accept string
	}{
		{"application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf,application/json"},
		{"application/json", "application/json, */*"},
	} {
		t.Run(tc.contentType, func(t *testing.T) {
			api := &fakeAPIServer{}
			srv := httptest.NewServer(api)
			defer srv.Close()
			cfg := config.Default()
			cfg.ContentType = tc.contentType
			kc := agentClients(t, srv, cfg)
			ctx := context.Background()
			if _, err := kc.main.Pods("default").Get(ctx, "p", metav1.GetOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := kc.events.Events().Create(newEvent()); err != nil {
				t.Fatal(err)
			}
			if _, err := kc.status.Nodes().Get(ctx, "n", metav1.GetOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := kc.heartbeat.Leases("kube-node-lease").Get(ctx, "n", metav1.GetOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{"/api/v1/namespaces/default/pods/p", "/api/v1/namespaces/default/events", "/api/v1/nodes/n", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n"} {
				if got := api.first(p).accept; got != tc.accept {
					t.Errorf("%s: Accept %q, want %q", p, got, tc.accept)
				}
			}
			if got := api.first("/api/v1/namespaces/default/events").contentType; got != tc.contentType {
				t.Errorf("event written as %q, want %q", got, tc.contentType)
			}
		})
	}
}

// With a managed client certificate every client presents the current
// certificate, and after a rotation (closeMain, closeHBIdle: what
// newAPIClients' onRotate does) every one presents the new one: the
// Events and node status clients follow the main client's transport.
func TestAgentClientsFollowTheRotatingCertificate(t *testing.T) {
	ca, err := pki.LoadOrCreateCA(filepath.Join(t.TempDir(), "ca"), "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	pair := func(cn string) *tls.Certificate {
		p, err := ca.IssueTLS(cn, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	srv := httptest.NewUnstartedServer(&fakeAPIServer{})
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	var cur atomic.Pointer[tls.Certificate]
	cur.Store(pair("system:node:old"))
	get := func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cur.Load(), nil }
	main := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}}
	hb, _, closeMain, closeHBIdle, err := rotatingClientConfigs(main, time.Second, get)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := newKubeClients(config.Default(), &apiClients{main: main, hb: hb}, "nodeagent/test")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := func() map[string]string {
		out := map[string]string{}
		if p, err := kc.main.Pods("default").Get(ctx, "p", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		} else {
			out["main"] = p.Name
		}
		if e, err := kc.events.Events().Create(newEvent()); err != nil {
			t.Fatal(err)
		} else {
			out["events"] = e.Name
		}
		if n, err := kc.status.Nodes().Get(ctx, "n", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		} else {
			out["status"] = n.Name
		}
		if l, err := kc.heartbeat.Leases("kube-node-lease").Get(ctx, "n", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		} else {
			out["heartbeat"] = l.Name
		}
		return out
	}
	check := func(when, want string) {
		t.Helper()
		var wrong []string
		for client, cn := range names() {
			if cn != want {
				wrong = append(wrong, client+" presented "+cn)
			}
		}
		if len(wrong) > 0 {
			t.Errorf("%s: %s; want %s", when, strings.Join(wrong, ", "), want)
		}
	}
	check("before the rotation", "system:node:old")
	cur.Store(pair("system:node:new"))
	closeMain()
	closeHBIdle()
	check("after the rotation", "system:node:new")
}
