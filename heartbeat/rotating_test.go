package heartbeat

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

func selfSigned(t *testing.T, cn string) *tls.Certificate {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
}

// With a rotating certificate, closeHBIdle never cuts a renewal in flight,
// and the heartbeat's next connection presents the new certificate; the
// main client switches after closeMain.
func TestRotatingClientConfigsSwitchCertificates(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		cn := "anonymous"
		if len(r.TLS.PeerCertificates) > 0 {
			cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		_, _ = io.WriteString(w, cn)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	var cur atomic.Pointer[tls.Certificate]
	cur.Store(selfSigned(t, "old"))
	get := func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cur.Load(), nil }
	main := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}}
	hb, _, closeMain, closeHBIdle, err := NewRotatingClientConfigs(main, time.Second, get,
		func(c *rest.Config, dial func(ctx context.Context, network, address string) (net.Conn, error)) error {
			tc, err := rest.TLSConfigFor(c)
			if err != nil {
				return err
			}
			tc.GetClientCertificate = get
			c.Transport = &http.Transport{TLSClientConfig: tc, DialContext: dial, ForceAttemptHTTP2: true}
			c.TLSClientConfig = rest.TLSClientConfig{}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	hbClient := &http.Client{Transport: hb.Transport, Timeout: 10 * time.Second}
	mainClient := &http.Client{Transport: main.Transport, Timeout: 10 * time.Second}
	who := func(c *http.Client, path string) (string, error) {
		resp, err := c.Get(srv.URL + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	for _, c := range []*http.Client{hbClient, mainClient} {
		if got, err := who(c, "/"); got != "old" || err != nil {
			t.Fatalf("before the rotation: %q %v", got, err)
		}
	}
	// A renewal in flight when the certificate rotates.
	inFlight := make(chan error, 1)
	go func() {
		got, err := who(hbClient, "/slow")
		if err == nil && got != "old" {
			err = io.ErrUnexpectedEOF
		}
		inFlight <- err
	}()
	time.Sleep(200 * time.Millisecond)
	cur.Store(selfSigned(t, "new"))
	closeMain()
	closeHBIdle()
	close(release)
	if err := <-inFlight; err != nil {
		t.Fatalf("the renewal in flight failed across the rotation: %v", err)
	}
	if got, err := who(mainClient, "/"); got != "new" || err != nil {
		t.Fatalf("main client after closeMain: %q %v", got, err)
	}
	closeHBIdle() // what the agent does again once the renewal is over
	if got, err := who(hbClient, "/"); got != "new" || err != nil {
		t.Fatalf("heartbeat client after closeHBIdle: %q %v", got, err)
	}
}
