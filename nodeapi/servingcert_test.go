package nodeapi

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/certificate"
	"github.com/nodeagent/nodeagent/internal/pki"
	"github.com/nodeagent/nodeagent/runtime"
)

// The serving certificate manager requests a certificate for the Node's
// addresses, serves it once issued, and requests the next one at 70–90% of
// its lifetime, serving the old one until then; kubelet's files.
func TestServingManagerRenews(t *testing.T) {
	ca, err := pki.LoadOrCreateCA(filepath.Join(t.TempDir(), "ca"), "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	clk := testingclock.NewFakeClock(time.Now())
	client := fake.NewClientset()
	var created atomic.Int32
	var last atomic.Pointer[x509.CertificateRequest]
	client.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		csr := a.(k8stesting.CreateAction).GetObject().(*certv1.CertificateSigningRequest).DeepCopy()
		n := created.Add(1)
		csr.Name = "csr-" + string(rune('a'+n))
		b, _ := pem.Decode(csr.Spec.Request)
		req, err := x509.ParseCertificateRequest(b.Bytes)
		if err != nil {
			t.Error(err)
		}
		last.Store(req)
		// Approved and signed at once: valid one hour from the fake now.
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(n)), Subject: req.Subject, DNSNames: req.DNSNames, IPAddresses: req.IPAddresses,
			NotBefore: clk.Now(), NotAfter: clk.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, req.PublicKey, ca.Key)
		if err != nil {
			t.Error(err)
		}
		csr.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		if err := client.Tracker().Add(csr); err != nil {
			t.Error(err)
		}
		return true, csr, nil
	})
	node := &v1.Node{Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.7"}, {Type: v1.NodeHostName, Address: "node-a"}}}}
	opts := Options{NodeName: "node-a", CertDir: t.TempDir(), Node: func() *v1.Node { return node }, Clock: clk,
		Client: &Client{CertificateSigningRequests: client.CertificatesV1().CertificateSigningRequests()}}
	m, err := newServingManager(opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	certs := &servingCerts{mgr: m}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Run(ctx)
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("the first certificate", func() bool { return m.Current() != nil && clk.HasWaiters() })
	served := func() *x509.Certificate { c, _ := certs.get(nil); return c.Leaf }
	first := served()
	req := last.Load()
	if req.Subject.CommonName != "system:node:node-a" || len(req.Subject.Organization) != 1 || req.Subject.Organization[0] != "system:nodes" ||
		len(req.DNSNames) != 1 || req.DNSNames[0] != "node-a" || len(req.IPAddresses) != 1 || req.IPAddresses[0].String() != "192.0.2.7" {
		t.Fatalf("CSR subject %s DNS %v IPs %v", req.Subject, req.DNSNames, req.IPAddresses)
	}
	// Not before 70% of the hour (42 minutes) whatever the jitter.
	clk.Step(41 * time.Minute)
	time.Sleep(50 * time.Millisecond)
	if created.Load() != 1 || served() != first {
		t.Fatalf("renewed early: %d CSRs", created.Load())
	}
	clk.Step(14 * time.Minute)
	waitFor("the renewal", func() bool { return created.Load() == 2 && served() != first })
	// kubelet's file: a restarted agent reuses the stored certificate.
	c, err := certificate.NewFileStore(opts.CertDir, "kubelet-server").Current()
	if err != nil || c.Leaf.SerialNumber.Cmp(big.NewInt(2)) != 0 {
		t.Fatalf("stored certificate not reused: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(opts.CertDir, "kubelet-server-current.pem")); err != nil {
		t.Fatal(err)
	}
}

// A new serving certificate (a renewal) is presented to new connections
// only: an open kubectl logs -f keeps streaming on its connection.
func TestCertificateChangeKeepsOpenStreams(t *testing.T) {
	e := newTestEnv(t, func(o *Options) { o.Clock = nil })
	pod := testPod()
	e.pods.pods = []*v1.Pod{pod}
	writeAttempt(t, e.logs, pod, "app", 0, "hello")
	e.conts.cs = []runtime.Container{{ID: "c1", Pod: runtime.PodRef{UID: pod.UID}, Name: "app", Attempt: 0, State: runtime.StateRunning}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrC := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- e.s.Run(ctx, func(a net.Addr) { addrC <- a }) }()
	addr := (<-addrC).String()

	kp := e.keyPair(t, "admin", nil, nil)
	// The test checks which certificate is presented, not its chain.
	dial := func() *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{kp}}}}
	}
	resp, err := dial().Get("https://" + addr + "/containerLogs/default/web/app?follow=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	before := resp.TLS.PeerCertificates[0]
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "hello\n" {
		t.Fatalf("followed %q %v", line, err)
	}

	// Renewal: what the bootstrapper does once a new certificate is issued.
	next := e.keyPair(t, "system:node:node-a", []string{"system:nodes"}, []string{"node-a", "127.0.0.1"})
	e.s.certs.cur.Store(&next)

	writeAttempt(t, e.logs, pod, "app", 0, "after renewal")
	got := make(chan string, 1)
	go func() { line, _ := br.ReadString('\n'); got <- line }()
	select {
	case line := <-got:
		if line != "after renewal\n" {
			t.Fatalf("the open follow read %q after the certificate changed", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the open follow stopped streaming when the certificate changed")
	}
	r2, err := dial().Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if now := r2.TLS.PeerCertificates[0]; now.SerialNumber.Cmp(next.Leaf.SerialNumber) != 0 || now.SerialNumber.Cmp(before.SerialNumber) == 0 {
		t.Fatalf("a new connection got serial %s; want the new certificate's %s", now.SerialNumber, next.Leaf.SerialNumber)
	}
	cancel()
	resp.Body.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
