package certificate

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/pki"
)

func TestRotationDeadline(t *testing.T) {
	nb := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	na := nb.Add(100 * time.Hour)
	for _, tc := range []struct {
		frac float64
		want time.Duration
	}{{0, 70 * time.Hour}, {0.5, 80 * time.Hour}, {0.999999, 90 * time.Hour}} {
		if got := RotationDeadline(nb, na, tc.frac).Sub(nb); got.Round(time.Minute) != tc.want {
			t.Errorf("frac %v: %s, want %s", tc.frac, got, tc.want)
		}
	}
}

func TestRenewAt(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:a", Organization: []string{"system:nodes"}}}
	leaf := func(cn string, from, to time.Duration) *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}}, NotBefore: now.Add(from), NotAfter: now.Add(to)}
	}
	for _, tc := range []struct {
		desc              string
		leaf              *x509.Certificate
		rotate, rotateNow bool
		want              time.Time
	}{
		{desc: "no certificate", rotate: true, want: now},
		{desc: "no certificate, no rotation: bootstrap", want: now},
		{desc: "expired", leaf: leaf("system:node:a", -2*time.Hour, -time.Second), rotate: true, want: now},
		{desc: "expired, no rotation", leaf: leaf("system:node:a", -2*time.Hour, -time.Second), want: now},
		{desc: "not yet valid", leaf: leaf("system:node:a", time.Minute, time.Hour), rotate: true, want: now},
		{desc: "another identity (kubeadm's admin credentials)", leaf: leaf("kubernetes-admin", -time.Hour, time.Hour), rotate: true, want: now},
		{desc: "embedded kubeconfig certificate: at once", leaf: leaf("system:node:a", -time.Hour, 9*time.Hour), rotate: true, rotateNow: true, want: now},
		{desc: "valid: at 80% with frac 0.5", leaf: leaf("system:node:a", -time.Hour, 9*time.Hour), rotate: true, want: now.Add(7 * time.Hour)},
		{desc: "valid, past the deadline: now-ish", leaf: leaf("system:node:a", -9*time.Hour, time.Hour), rotate: true, want: now.Add(-time.Hour)},
		{desc: "valid, no rotation: at expiry", leaf: leaf("system:node:a", -time.Hour, 9*time.Hour), want: now.Add(9 * time.Hour)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := RenewAt(tc.leaf, tmpl, now, 0.5, tc.rotate, tc.rotateNow); !got.Round(time.Second).Equal(tc.want) {
				t.Errorf("RenewAt = %s, want %s", got, tc.want)
			}
		})
	}
}

// fakeCSRs is the certificates API: a CSR is answered by decide (approve
// and sign, deny, or leave pending) when it is read.
type fakeCSRs struct {
	t     *testing.T
	ca    *pki.CA
	clk   *clocktesting.FakeClock
	life  time.Duration
	who   string // which credentials this client stands for
	mu    sync.Mutex
	csrs  map[string]*certv1.CertificateSigningRequest
	order []string
	// decide returns "approve", "deny" or "" (pending) for a CSR.
	decide    func(csr *certv1.CertificateSigningRequest) string
	createErr error
	n         int
}

func (f *fakeCSRs) Create(_ context.Context, csr *certv1.CertificateSigningRequest, _ metav1.CreateOptions) (*certv1.CertificateSigningRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.createErr != nil {
		return nil, f.createErr
	}
	csr = csr.DeepCopy()
	if csr.Name == "" {
		f.n++
		csr.Name = fmt.Sprintf("%s%d", csr.GenerateName, f.n)
	}
	if _, ok := f.csrs[csr.Name]; ok {
		return nil, apierrors.NewAlreadyExists(schema.GroupResource{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}, csr.Name)
	}
	csr.Annotations = map[string]string{"by": f.who}
	f.csrs[csr.Name] = csr
	f.order = append(f.order, csr.Name)
	return csr.DeepCopy(), nil
}

func (f *fakeCSRs) Get(_ context.Context, name string, _ metav1.GetOptions) (*certv1.CertificateSigningRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	csr, ok := f.csrs[name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}, name)
	}
	if len(csr.Status.Conditions) == 0 && f.decide != nil {
		switch f.decide(csr) {
		case "approve":
			csr.Status.Conditions = []certv1.CertificateSigningRequestCondition{{Type: certv1.CertificateApproved, Status: "True"}}
			csr.Status.Certificate = f.sign(csr)
		case "deny":
			csr.Status.Conditions = []certv1.CertificateSigningRequestCondition{{Type: certv1.CertificateDenied, Status: "True", Reason: "TestDenied", Message: "not this one"}}
		}
	}
	return csr.DeepCopy(), nil
}

func (f *fakeCSRs) sign(csr *certv1.CertificateSigningRequest) []byte {
	b, _ := pem.Decode(csr.Spec.Request)
	req, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		f.t.Error(err)
		return nil
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(len(f.csrs))), Subject: req.Subject,
		NotBefore: f.clk.Now(), NotAfter: f.clk.Now().Add(f.life), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, f.ca.Cert, req.PublicKey, f.ca.Key)
	if err != nil {
		f.t.Error(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func (f *fakeCSRs) names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.order...)
}

type env struct {
	clk       *clocktesting.FakeClock
	boot, cur *fakeCSRs
	dir       string
	m         *Manager
	rotated   chan *tls.Certificate
}

func newEnv(t *testing.T, mutate func(*Config)) *env {
	t.Helper()
	ca, err := pki.LoadOrCreateCA(filepath.Join(t.TempDir(), "ca"), "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{clk: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), dir: t.TempDir(), rotated: make(chan *tls.Certificate, 10)}
	shared := map[string]*certv1.CertificateSigningRequest{}
	e.boot = &fakeCSRs{t: t, ca: ca, clk: e.clk, life: time.Hour, who: "bootstrap", csrs: shared}
	e.cur = &fakeCSRs{t: t, ca: ca, clk: e.clk, life: time.Hour, who: "node", csrs: shared}
	cfg := Config{
		Name: "client", SignerName: certv1.KubeAPIServerClientKubeletSignerName,
		Template: func() *x509.CertificateRequest {
			return &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:a", Organization: []string{"system:nodes"}}}
		},
		Usages: []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth},
		Store:  NewFileStore(filepath.Join(e.dir, "pki"), "kubelet-client"),
		Client: func(current *tls.Certificate) (CSRClient, error) {
			if current == nil {
				return e.boot, nil
			}
			return e.cur, nil
		},
		Rotate:         true,
		PendingKeyFile: filepath.Join(e.dir, "pki", PendingClientKeyFile),
		OnRotate:       func(c *tls.Certificate) { e.rotated <- c },
		Log:            slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		Clock:          e.clk,
		Rand:           func() float64 { return 0.5 },
		PollInterval:   time.Second,
		WaitTimeout:    time.Minute,
		Backoff:        &wait.Backoff{Duration: 2 * time.Second, Factor: 2, Steps: 100, Cap: 16 * time.Second},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	if e.m, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// until steps the fake clock by step whenever the manager sleeps, until
// cond holds (bounded).
func (e *env) until(t *testing.T, what string, step time.Duration, cond func() bool) {
	t.Helper()
	for i := 0; i < 2000; i++ {
		if cond() {
			return
		}
		if e.clk.HasWaiters() {
			e.clk.Step(step)
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func (e *env) rotation(t *testing.T) *tls.Certificate {
	t.Helper()
	select {
	case c := <-e.rotated:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no rotation")
		return nil
	}
}

// A node without a certificate bootstraps with the bootstrap credentials,
// stores the pair as kubelet does, and renews it at 80% (frac 0.5) with a
// CSR authenticated by its own certificate; until the renewal is issued the
// old certificate stays in use.
func TestBootstrapThenRotate(t *testing.T) {
	approve := make(chan bool, 1)
	approve <- true
	e := newEnv(t, nil)
	decide := func(*certv1.CertificateSigningRequest) string {
		select {
		case ok := <-approve:
			if ok {
				return "approve"
			}
		default:
		}
		return ""
	}
	e.boot.decide, e.cur.decide = decide, decide
	if e.m.Current() != nil {
		t.Fatal("a certificate before the bootstrap")
	}
	e.run(t)
	first := e.rotation(t)
	if first.Leaf.Subject.CommonName != "system:node:a" || e.boot.csrs[e.boot.names()[0]].Annotations["by"] != "bootstrap" {
		t.Fatalf("bootstrap certificate %s from %v", first.Leaf.Subject, e.boot.names())
	}
	if n := e.boot.names()[0]; len(n) < 10 || n[:9] != "node-csr-" {
		t.Errorf("bootstrap CSR name %q, want kubelet's node-csr-<digest>", n)
	}
	cur, err := os.Readlink(filepath.Join(e.dir, "pki", "kubelet-client-current.pem"))
	if err != nil || filepath.Base(cur) != "kubelet-client-2026-01-01-00-00-00.pem" {
		t.Fatalf("kubelet-client-current.pem -> %q, %v", cur, err)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "pki", PendingClientKeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pending key file left behind: %v", err)
	}
	// The renewal is due at 48 minutes; its CSR stays pending for a while.
	e.until(t, "the renewal CSR", time.Minute, func() bool { return len(e.cur.names()) == 1 })
	if got := e.clk.Now().Sub(first.Leaf.NotBefore); got < 48*time.Minute || got > 49*time.Minute {
		t.Errorf("renewal requested %s into the certificate's hour, want 48m", got)
	}
	e.until(t, "a few polls of the pending CSR", time.Second, func() bool { return errors.Is(e.m.Problem(), ErrNotApproved) })
	if e.m.Current() != first {
		t.Fatal("the old certificate was dropped while the new one is pending")
	}
	approve <- true
	e.until(t, "the renewal", time.Second, func() bool { return e.m.Rotations() == 2 })
	second := e.rotation(t)
	if second.Leaf.SerialNumber.Cmp(first.Leaf.SerialNumber) == 0 || e.m.Current() != second || e.m.Problem() != nil || e.m.Rotations() != 2 {
		t.Fatalf("after the renewal: current %v problem %v rotations %d", e.m.Current().Leaf.SerialNumber, e.m.Problem(), e.m.Rotations())
	}
	if e.cur.csrs[e.cur.names()[0]].Annotations["by"] != "node" {
		t.Error("the renewal was not requested with the node's own certificate")
	}
	// A restarted manager loads the renewed pair.
	again, err := New(e.m.cfg)
	if err != nil || again.Current() == nil || again.Current().Leaf.SerialNumber.Cmp(second.Leaf.SerialNumber) != 0 {
		t.Fatalf("restart: %v", err)
	}
}

// A denied CSR is retried with back-off and a new key (a new CSR name),
// and Problem says why meanwhile.
func TestDeniedIsRetried(t *testing.T) {
	e := newEnv(t, nil)
	var mu sync.Mutex
	denials := 2
	e.boot.decide = func(*certv1.CertificateSigningRequest) string {
		mu.Lock()
		defer mu.Unlock()
		if denials > 0 {
			denials--
			return "deny"
		}
		return "approve"
	}
	e.run(t)
	e.until(t, "a denial", time.Second, func() bool { return errors.Is(e.m.Problem(), ErrDenied) })
	e.until(t, "the certificate", time.Second, func() bool { return e.m.Rotations() == 1 })
	c := e.rotation(t)
	if c == nil || e.m.Problem() != nil {
		t.Fatalf("no certificate after the denials: %v", e.m.Problem())
	}
	names := e.boot.names()
	if len(names) != 3 || names[0] == names[1] || names[1] == names[2] {
		t.Errorf("CSRs %v: want three, each with a new key", names)
	}
}

// Rejected bootstrap credentials are reported as such and retried.
func TestUnauthorizedIsRetried(t *testing.T) {
	e := newEnv(t, nil)
	e.boot.mu.Lock()
	e.boot.createErr = apierrors.NewUnauthorized("Unauthorized")
	e.boot.mu.Unlock()
	e.boot.decide = func(*certv1.CertificateSigningRequest) string { return "approve" }
	e.run(t)
	e.until(t, "the 401", time.Second, func() bool { return errors.Is(e.m.Problem(), ErrUnauthorized) })
	e.boot.mu.Lock()
	e.boot.createErr = nil
	e.boot.mu.Unlock()
	e.until(t, "the certificate after the token was fixed", time.Second, func() bool { return e.m.Current() != nil })
}

// Without rotation, a valid certificate is kept until it expires.
func TestNoRotationKeepsCertificate(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Rotate = false })
	e.boot.decide = func(*certv1.CertificateSigningRequest) string { return "approve" }
	e.cur.decide = e.boot.decide
	e.run(t)
	first := e.rotation(t)
	e.until(t, "50 minutes", time.Minute, func() bool { return e.clk.Now().Sub(first.Leaf.NotBefore) > 55*time.Minute })
	if len(e.cur.names()) != 0 {
		t.Fatalf("rotated without rotateCertificates: %v", e.cur.names())
	}
	// Expired: requested again, with the bootstrap credentials.
	e.until(t, "the post-expiry request", time.Minute, func() bool { return len(e.boot.names()) == 2 })
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
