package certificate

import (
	"crypto/tls"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"

	"github.com/nodeagent/nodeagent/internal/pki"
)

// A client built by UseClientCertificate presents the current certificate
// at each handshake; closing the dialer's connections (what a rotation
// does) makes the next request present the new one.
func TestUseClientCertificateSwitches(t *testing.T) {
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
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			_, _ = io.WriteString(w, "anonymous")
			return
		}
		_, _ = io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	var cur atomic.Pointer[tls.Certificate]
	get := func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if c := cur.Load(); c != nil {
			return c, nil
		}
		return &tls.Certificate{}, nil
	}
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM, CertData: []byte("ignored"), KeyData: []byte("ignored")}}
	d := connrotation.NewDialer((&net.Dialer{Timeout: 5 * time.Second}).DialContext)
	if err := UseClientCertificate(cfg, get, d.DialContext); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: cfg.Transport, Timeout: 5 * time.Second}
	who := func() string {
		t.Helper()
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := who(); got != "anonymous" {
		t.Fatalf("before the bootstrap: %q", got)
	}
	cur.Store(pair("system:node:a"))
	d.CloseAll()
	if got := who(); got != "system:node:a" {
		t.Fatalf("after the bootstrap: %q", got)
	}
	cur.Store(pair("system:node:a-renewed"))
	if got := who(); got != "system:node:a" {
		t.Fatalf("an open connection changed certificate without a handshake: %q", got)
	}
	d.CloseAll()
	if got := who(); got != "system:node:a-renewed" {
		t.Fatalf("after the rotation: %q", got)
	}
}
