package nodeapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/crilog"
	"github.com/nodeagent/nodeagent/internal/pki"
	"github.com/nodeagent/nodeagent/runtime"
)

func TestRequestAttributes(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         Attributes
	}{
		{"GET", "/containerLogs/ns/p/c", Attributes{"get", []string{"proxy"}}},
		{"POST", "/exec/ns/p/c", Attributes{"create", []string{"proxy"}}},
		{"GET", "/pods", Attributes{"get", []string{"pods", "proxy"}}},
		{"GET", "/pods/", Attributes{"get", []string{"pods", "proxy"}}},
		{"GET", "/podsx", Attributes{"get", []string{"proxy"}}},
		{"GET", "/healthz", Attributes{"get", []string{"healthz", "proxy"}}},
		{"GET", "/stats/summary", Attributes{"get", []string{"stats"}}},
		{"GET", "/metrics/resource", Attributes{"get", []string{"metrics"}}},
		{"GET", "/logs/syslog", Attributes{"get", []string{"log"}}},
		{"DELETE", "/run/x", Attributes{"delete", []string{"proxy"}}},
		{"GET", "/debug/pprof/heap", Attributes{"get", []string{"proxy"}}},
		{"PUT", "/debug/flags/v", Attributes{"update", []string{"proxy"}}},
		{"GET", "/logs/", Attributes{"get", []string{"log"}}},
		{"POST", "/checkpoint/ns/p/c", Attributes{"create", []string{"checkpoint"}}},
		{"GET", "/healthz/syncloop", Attributes{"get", []string{"healthz", "proxy"}}},
	} {
		if got := RequestAttributes(tc.method, tc.path); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %s = %+v, want %+v", tc.method, tc.path, got, tc.want)
		}
	}
}

type fakePods struct{ pods []*v1.Pod }

func (f *fakePods) GetPods() []*v1.Pod { return f.pods }
func (f *fakePods) GetPodByName(ns, name string) (*v1.Pod, bool) {
	for _, p := range f.pods {
		if p.Namespace == ns && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

type fakeContainers struct {
	mu              sync.Mutex
	cs              []runtime.Container
	lists, inspects int
	podLists        int
	// listUnknown makes ListContainers report every container's state as
	// unknown, as containerd's task list does when shims are slow.
	listUnknown bool
	inspectErr  error
}

func (f *fakeContainers) ListContainers(context.Context) ([]runtime.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	out := append([]runtime.Container{}, f.cs...)
	if f.listUnknown {
		for i := range out {
			out[i].State = runtime.StateUnknown
		}
	}
	return out, nil
}

func (f *fakeContainers) PodContainers(_ context.Context, uid types.UID) ([]runtime.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.podLists++
	var out []runtime.Container
	for _, c := range f.cs {
		if c.Pod.UID == uid {
			out = append(out, c)
		}
	}
	return out, nil
}

func (f *fakeContainers) InspectContainer(_ context.Context, id string) (runtime.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inspects++
	if f.inspectErr != nil {
		return runtime.Container{}, f.inspectErr
	}
	for _, c := range f.cs {
		if c.ID == id {
			return c, nil
		}
	}
	return runtime.Container{}, fmt.Errorf("inspect %s: %w", id, runtime.ErrNotFound)
}

// fakeAPI answers TokenReview (token "good-<user>" authenticates <user>)
// and SubjectAccessReview (allowed when allow says so), counting calls.
type fakeAPI struct {
	*fake.Clientset
	tokenReviews, sars atomic.Int32
	mu                 sync.Mutex
	lastSAR            authzv1.SubjectAccessReviewSpec
}

func newFakeAPI(allow func(spec authzv1.SubjectAccessReviewSpec) bool) *fakeAPI {
	f := &fakeAPI{Clientset: fake.NewClientset()}
	f.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		f.tokenReviews.Add(1)
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
		out := tr.DeepCopy()
		if u, ok := strings.CutPrefix(tr.Spec.Token, "good-"); ok {
			out.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: u, Groups: []string{"g-" + u}}}
		}
		return true, out, nil
	})
	f.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		f.sars.Add(1)
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview)
		f.mu.Lock()
		f.lastSAR = sar.Spec
		f.mu.Unlock()
		out := sar.DeepCopy()
		out.Status.Allowed = allow(sar.Spec)
		return true, out, nil
	})
	return f
}

// client is the server's Client over the fake Clientset.
func (f *fakeAPI) client() *Client {
	return &Client{
		TokenReviews:               f.AuthenticationV1().TokenReviews(),
		SubjectAccessReviews:       f.AuthorizationV1().SubjectAccessReviews(),
		CertificateSigningRequests: f.CertificatesV1().CertificateSigningRequests(),
	}
}

type testEnv struct {
	s     *Server
	api   *fakeAPI
	ca    *pki.CA
	pods  *fakePods
	conts *fakeContainers
	logs  string
	clock *testingclock.FakeClock
}

func newTestEnv(t *testing.T, mutate func(*Options)) *testEnv {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(filepath.Join(dir, "ca"), "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{
		api: newFakeAPI(func(s authzv1.SubjectAccessReviewSpec) bool {
			return s.User == "admin" || s.User == "pods-reader" && s.ResourceAttributes.Subresource == "pods" ||
				s.User == "log-reader" && s.ResourceAttributes.Subresource == "log"
		}),
		ca: ca, pods: &fakePods{}, conts: &fakeContainers{}, logs: filepath.Join(dir, "logs"),
		clock: testingclock.NewFakeClock(time.Now()),
	}
	opts := Options{
		NodeName: "node-a", Address: "127.0.0.1", Port: 0,
		CertDir: filepath.Join(dir, "pki"), Hosts: []string{"node-a", "127.0.0.1"},
		ClientCAFile: filepath.Join(dir, "ca", "ca.crt"), Client: e.api.client(),
		WebhookAuthentication: true, AuthenticationCacheTTL: time.Minute,
		AuthorizationMode: "Webhook", AuthorizedCacheTTL: time.Minute, UnauthorizedCacheTTL: 10 * time.Second,
		Pods: e.pods, Containers: e.conts, LogRoot: e.logs,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: e.clock,
	}
	if mutate != nil {
		mutate(&opts)
	}
	e.s, err = New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// keyPair issues a certificate and key of the test CA, parsed.
func (e *testEnv) keyPair(t *testing.T, cn string, orgs, hosts []string) tls.Certificate {
	t.Helper()
	certPEM, keyPEM, err := e.ca.Issue(cn, orgs, hosts)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if kp.Leaf, err = x509.ParseCertificate(kp.Certificate[0]); err != nil {
		t.Fatal(err)
	}
	return kp
}

// clientCert issues a client certificate of the test CA.
func (e *testEnv) clientCert(t *testing.T, user string, groups ...string) *x509.Certificate {
	t.Helper()
	certPEM, _, err := e.ca.Issue(user, groups, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(certPEM)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (e *testEnv) do(method, path string, setup func(*http.Request)) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	if setup != nil {
		setup(r)
	}
	w := httptest.NewRecorder()
	e.s.Handler().ServeHTTP(w, r)
	return w
}

func bearer(token string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }
}

func withCert(c *x509.Certificate) func(*http.Request) {
	return func(r *http.Request) { r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}} }
}

func TestAuthentication(t *testing.T) {
	e := newTestEnv(t, nil)
	other, err := pki.LoadOrCreateCA(filepath.Join(t.TempDir(), "other"), "other-ca")
	if err != nil {
		t.Fatal(err)
	}
	otherPEM, _, _ := other.Issue("admin", nil, nil)
	b, _ := pem.Decode(otherPEM)
	foreign, _ := x509.ParseCertificate(b.Bytes)
	for _, tc := range []struct {
		name  string
		setup func(*http.Request)
		code  int
	}{
		{"no credentials", nil, 401},
		{"bad token", bearer("bad"), 401},
		{"basic auth", func(r *http.Request) { r.SetBasicAuth("admin", "x") }, 401},
		{"good token", bearer("good-admin"), 200},
		{"token without the right", bearer("good-nobody"), 403},
		{"client certificate", withCert(e.clientCert(t, "admin", "system:masters")), 200},
		{"client certificate without the right", withCert(e.clientCert(t, "nobody")), 403},
		{"certificate of another CA", withCert(foreign), 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := e.do("GET", "/healthz", tc.setup)
			if w.Code != tc.code {
				t.Fatalf("code %d (%s), want %d", w.Code, w.Body.String(), tc.code)
			}
		})
	}
	// Answers are cached: the same token and user again cost nothing.
	trs, sars := e.api.tokenReviews.Load(), e.api.sars.Load()
	e.do("GET", "/healthz", bearer("good-admin"))
	e.do("GET", "/healthz", bearer("bad"))
	if e.api.tokenReviews.Load() != trs || e.api.sars.Load() != sars {
		t.Errorf("cached answers asked again: %d→%d TokenReviews, %d→%d SARs", trs, e.api.tokenReviews.Load(), sars, e.api.sars.Load())
	}
	// Until their TTL runs out.
	e.clock.Step(2 * time.Minute)
	e.do("GET", "/healthz", bearer("good-admin"))
	if e.api.tokenReviews.Load() != trs+1 {
		t.Errorf("expired token answer not asked again")
	}
}

func TestAuthorizationAttributes(t *testing.T) {
	e := newTestEnv(t, nil)
	w := e.do("GET", "/containerLogs/default/p/c", bearer("good-nobody"))
	if w.Code != 403 || !strings.Contains(w.Body.String(), "Forbidden (user=nobody, verb=get, resource=nodes, subresource(s)=[proxy])") {
		t.Fatalf("%d %q", w.Code, w.Body.String())
	}
	e.api.mu.Lock()
	got := e.api.lastSAR
	e.api.mu.Unlock()
	want := authzv1.SubjectAccessReviewSpec{
		User: "nobody", Groups: []string{"g-nobody"},
		ResourceAttributes: &authzv1.ResourceAttributes{Verb: "get", Version: "v1", Resource: "nodes", Subresource: "proxy", Name: "node-a"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("SAR %+v\nwant %+v", got, want)
	}
	// nodes/pods is enough for /pods (kubelet's fine-grained authz).
	if w := e.do("GET", "/pods", bearer("good-pods-reader")); w.Code != 200 {
		t.Fatalf("/pods with nodes/pods: %d %s", w.Code, w.Body.String())
	}
	// Anonymous, when enabled, is authorized as system:anonymous.
	a := newTestEnv(t, func(o *Options) { o.Anonymous = true })
	if w := a.do("GET", "/healthz", nil); w.Code != 403 || !strings.Contains(w.Body.String(), "user=system:anonymous") {
		t.Fatalf("anonymous: %d %q", w.Code, w.Body.String())
	}
	// AlwaysAllow lets any authenticated user in, and asks nothing.
	aa := newTestEnv(t, func(o *Options) { o.AuthorizationMode = "AlwaysAllow" })
	if w := aa.do("GET", "/healthz", bearer("good-nobody")); w.Code != 200 || aa.api.sars.Load() != 0 {
		t.Fatalf("AlwaysAllow: %d, %d SARs", w.Code, aa.api.sars.Load())
	}
}

// writeAttempt writes a container attempt's CRI log.
func writeAttempt(t *testing.T, root string, pod *v1.Pod, container string, attempt int, lines ...string) {
	t.Helper()
	p := filepath.Join(root, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID), container, fmt.Sprintf("%d.log", attempt))
	w, err := crilog.OpenWriter(p, crilog.Rotation{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) > 0 {
		if err := w.Copy(strings.NewReader(strings.Join(lines, "\n")+"\n"), crilog.Stdout); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
}

func testPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: types.UID("uid-1")},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app"}, {Name: "side"}}},
		Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{
			{Name: "side", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}},
		}},
	}
}

func TestContainerLogs(t *testing.T) {
	e := newTestEnv(t, nil)
	pod := testPod()
	e.pods.pods = []*v1.Pod{pod}
	writeAttempt(t, e.logs, pod, "app", 0, "first run 1", "first run 2")
	writeAttempt(t, e.logs, pod, "app", 1, "second run 1", "second run 2", "second run 3")
	admin := bearer("good-admin")
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{"/containerLogs/default/web/app", 200, "second run 1\nsecond run 2\nsecond run 3\n"},
		{"/containerLogs/default/web/app?previous=true", 200, "first run 1\nfirst run 2\n"},
		{"/containerLogs/default/web/app?tailLines=1", 200, "second run 3\n"},
		{"/containerLogs/default/web/app?limitBytes=8", 200, "second r"},
		{"/containerLogs/default/web/app?tailLines=-1", 400, "tailLines: Invalid value: -1"},
		{"/containerLogs/default/web/app?sinceSeconds=5&sinceTime=2026-01-01T00:00:00Z", 400, "at most one of `sinceTime` or `sinceSeconds`"},
		{"/containerLogs/default/web/app?follow=maybe", 400, "follow"},
		{"/containerLogs/default/web/side", 400, `container "side" in pod "web" is waiting to start: ImagePullBackOff`},
		{"/containerLogs/default/web/side?previous=true", 400, `previous terminated container "side" in pod "web" not found`},
		{"/containerLogs/default/web/nope", 404, `container "nope" not found in pod "web"`},
		{"/containerLogs/default/gone/app", 404, `pod "gone" does not exist`},
	} {
		w := e.do("GET", tc.path, admin)
		if w.Code != tc.code || tc.code == 200 && w.Body.String() != tc.body || tc.code != 200 && !strings.Contains(w.Body.String(), tc.body) {
			t.Errorf("%s: %d %q, want %d %q", tc.path, w.Code, w.Body.String(), tc.code, tc.body)
		}
	}
	// sinceSeconds counts from the server's clock.
	w := e.do("GET", "/containerLogs/default/web/app?sinceSeconds=1&timestamps=true", admin)
	if w.Code != 200 || strings.Count(w.Body.String(), "\n") != 3 {
		t.Fatalf("since 1s: %d %q", w.Code, w.Body.String())
	}
	e.clock.Step(time.Hour)
	if w := e.do("GET", "/containerLogs/default/web/app?sinceSeconds=60", admin); w.Code != 200 || w.Body.Len() != 0 {
		t.Fatalf("since 60s an hour later: %d %q", w.Code, w.Body.String())
	}

	// /pods lists the pods.
	w = e.do("GET", "/pods", admin)
	var list v1.PodList
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil || list.Kind != "PodList" || len(list.Items) != 1 || list.Items[0].Name != "web" {
		t.Fatalf("/pods: %v %s", err, w.Body.String())
	}
}

// Over real TLS: the self-signed certificate is created once and reused,
// client certificates authenticate, and a follow streams until the
// container stops.
func TestServeTLSAndFollow(t *testing.T) {
	certDir := filepath.Join(t.TempDir(), "pki")
	e := newTestEnv(t, func(o *Options) { o.CertDir = certDir; o.Clock = nil })
	pod := testPod()
	e.pods.pods = []*v1.Pod{pod}
	writeAttempt(t, e.logs, pod, "app", 0, "hello")
	e.conts.cs = []runtime.Container{{Pod: runtime.PodRef{UID: pod.UID}, Name: "app", Attempt: 0, State: runtime.StateRunning}}
	first, err := os.ReadFile(filepath.Join(certDir, "kubelet.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(e.s.opts); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(filepath.Join(certDir, "kubelet.crt")); string(again) != string(first) {
		t.Fatal("the self-signed certificate was not reused")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrC := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- e.s.Run(ctx, func(a net.Addr) { addrC <- a }) }()
	addr := (<-addrC).String()

	kp := e.keyPair(t, "admin", nil, nil)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(first)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "node-a", Certificates: []tls.Certificate{kp}}}}
	resp, err := client.Get("https://" + addr + "/containerLogs/default/web/app?follow=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	buf := make([]byte, 6)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "hello\n" {
		t.Fatalf("followed %q %v", buf, err)
	}
	// The container stops: the follow ends within about a second.
	e.conts.mu.Lock()
	e.conts.cs[0].State = runtime.StateExited
	e.conts.mu.Unlock()
	ended := make(chan error, 1)
	go func() { _, err := io.ReadAll(resp.Body); ended <- err }()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("follow did not end when the container stopped")
	}
	// Without a client certificate: 401 over the wire too.
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "node-a"}}}
	r2, err := anon.Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != 401 {
		t.Fatalf("anonymous over TLS: %d", r2.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

type fakeExec struct{ calls atomic.Int32 }

func (f *fakeExec) Exec(context.Context, string, runtime.ExecOptions) (int, error) {
	f.calls.Add(1)
	return 0, nil
}

func TestExecRequests(t *testing.T) {
	fe := &fakeExec{}
	e := newTestEnv(t, func(o *Options) { o.Exec = fe })
	pod := testPod()
	e.pods.pods = []*v1.Pod{pod}
	e.conts.cs = []runtime.Container{{ID: "c1", Pod: runtime.PodRef{UID: pod.UID}, Name: "app", State: runtime.StateRunning}}
	// A busy node: the runtime's list says unknown, the agent's cache
	// knows the container runs.
	e.conts.listUnknown = true
	admin := bearer("good-admin")
	for _, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"POST", "/exec/default/web/app?output=1", 400, "command is required"},
		{"POST", "/exec/default/web/side?command=ls&output=1", 400, `container "side" in pod "web" is not running`},
		{"POST", "/exec/default/web/nope?command=ls&output=1", 404, `container "nope" not found in pod "web"`},
		{"POST", "/exec/default/web/other-uid/app?command=ls&output=1", 404, `pod "web" does not exist`},
		{"POST", "/exec/default/gone/app?command=ls&output=1", 404, `pod "gone" does not exist`},
		{"POST", "/attach/default/web/side?output=1", 400, `container "side" in pod "web" is not running`},
		{"POST", "/attach/default/web/app?output=1", 400, `container "app" in pod "web" has no log to attach to`},
		// Streams are negotiated by upgrade: a plain request is refused
		// by the streaming server, after the container was found.
		{"POST", "/exec/default/web/app?command=ls&output=1", 400, ""},
	} {
		w := e.do(tc.method, tc.path, admin)
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.body) {
			t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.path, w.Code, w.Body.String(), tc.code, tc.body)
		}
	}
	if fe.calls.Load() != 0 {
		t.Errorf("exec ran without streams")
	}
	if w := e.do("POST", "/exec/default/web/app?command=ls&output=1", admin); strings.Contains(w.Body.String(), "not running") {
		t.Errorf("a running container found not running (the runtime's list, not the pod cache): %q", w.Body.String())
	}
	// Exec needs nodes/proxy with verb create (POST).
	if w := e.do("POST", "/exec/default/web/app?command=ls", bearer("good-pods-reader")); w.Code != 403 || !strings.Contains(w.Body.String(), "verb=create") {
		t.Errorf("exec without nodes/proxy: %d %q", w.Code, w.Body.String())
	}
	noExec := newTestEnv(t, nil)
	if w := noExec.do("POST", "/exec/default/web/app?command=ls", admin); w.Code != 503 {
		t.Errorf("exec without a runtime: %d %q", w.Code, w.Body.String())
	}
}

// /metrics serves the agent's own metrics to users with nodes/metrics.
func TestAgentMetrics(t *testing.T) {
	e := newTestEnv(t, func(o *Options) {
		o.Metrics = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "nodeagent_up 1\n") })
	})
	if w := e.do("GET", "/metrics", bearer("good-admin")); w.Code != 200 || w.Body.String() != "nodeagent_up 1\n" {
		t.Fatalf("admin: %d %q", w.Code, w.Body.String())
	}
	if w := e.do("GET", "/metrics", bearer("good-pods-reader")); w.Code != 403 || !strings.Contains(w.Body.String(), "subresource(s)=[metrics]") {
		t.Fatalf("without nodes/metrics: %d %q", w.Code, w.Body.String())
	}
	if w := newTestEnv(t, nil).do("GET", "/metrics", bearer("good-admin")); w.Code != 404 {
		t.Fatalf("without a Metrics handler: %d", w.Code)
	}
}

// After an upgrade from the rootDir/logs layout: the attempt an older
// agent started is read from the legacy root, a newer one from podLogsDir,
// and --previous crosses from one to the other.
func TestContainerLogsAcrossLayouts(t *testing.T) {
	legacy := filepath.Join(t.TempDir(), "root", "logs")
	e := newTestEnv(t, func(o *Options) { o.LegacyLogRoots = []string{legacy} })
	pod := testPod()
	e.pods.pods = []*v1.Pod{pod}
	admin := bearer("good-admin")
	writeAttempt(t, legacy, pod, "app", 0, "old layout")
	if w := e.do("GET", "/containerLogs/default/web/app", admin); w.Code != 200 || w.Body.String() != "old layout\n" {
		t.Fatalf("adopted container's log: %d %q", w.Code, w.Body.String())
	}
	writeAttempt(t, e.logs, pod, "app", 1, "new layout")
	for _, tc := range []struct{ path, body string }{
		{"/containerLogs/default/web/app", "new layout\n"},
		{"/containerLogs/default/web/app?previous=true", "old layout\n"},
	} {
		if w := e.do("GET", tc.path, admin); w.Code != 200 || w.Body.String() != tc.body {
			t.Errorf("%s: %d %q, want %q", tc.path, w.Code, w.Body.String(), tc.body)
		}
	}
}

// tlsCipherSuites and tlsMinVersion are applied to the listening server:
// a Go TLS client on 127.0.0.1 that offers only a suite outside the list,
// or only versions below the minimum, fails the handshake; one that offers
// an allowed suite, or the minimum version, completes it.
func TestServeTLSCipherSuitesAndMinVersion(t *testing.T) {
	allowed := tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
	other := tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
	for _, tc := range []struct {
		name   string
		suites []uint16
		min    uint16
		client *tls.Config
		ok     bool
	}{
		{"allowed suite", []uint16{allowed}, 0, &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{allowed}}, true},
		{"suite not in the list", []uint16{allowed}, 0, &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{other}}, false},
		{"default list takes the other suite", nil, 0, &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{other}}, true},
		{"TLS 1.2 below minimum 1.3", nil, tls.VersionTLS13, &tls.Config{MaxVersion: tls.VersionTLS12}, false},
		{"TLS 1.3 at minimum 1.3", nil, tls.VersionTLS13, &tls.Config{MinVersion: tls.VersionTLS13}, true},
		{"TLS 1.1 below the default minimum", nil, 0, &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}, false},
		{"TLS 1.1 at minimum 1.1", nil, tls.VersionTLS11, &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, func(o *Options) { o.TLSCipherSuites = tc.suites; o.TLSMinVersion = tc.min })
			ctx, cancel := context.WithCancel(context.Background())
			addrC := make(chan net.Addr, 1)
			done := make(chan error, 1)
			go func() { done <- e.s.Run(ctx, func(a net.Addr) { addrC <- a }) }()
			addr := (<-addrC).String()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
			}()
			cfg := tc.client.Clone()
			cfg.InsecureSkipVerify = true
			d := &net.Dialer{Timeout: 5 * time.Second}
			conn, err := tls.DialWithDialer(d, "tcp", addr, cfg)
			if !tc.ok {
				if err == nil {
					st := conn.ConnectionState()
					conn.Close()
					t.Fatalf("handshake succeeded: version %x suite %s", st.Version, tls.CipherSuiteName(st.CipherSuite))
				}
				t.Logf("refused: %v", err)
				return
			}
			if err != nil {
				t.Fatalf("handshake: %v", err)
			}
			defer conn.Close()
			st := conn.ConnectionState()
			if len(tc.client.CipherSuites) == 1 && st.CipherSuite != tc.client.CipherSuites[0] {
				t.Errorf("suite %s", tls.CipherSuiteName(st.CipherSuite))
			}
			if tc.min != 0 && st.Version < tc.min {
				t.Errorf("version %x below %x", st.Version, tc.min)
			}
		})
	}
}
