package nodeapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/nodeagent/nodeagent/internal/pki"
	certv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
)

// servingCertFile is kubelet's name for the current bootstrapped serving
// certificate and key (one PEM file) in the certificate directory.
const servingCertFile = "kubelet-server-current.pem"

// servingCerts holds the certificate the server presents; it can change
// while the server runs (TLS handshakes read it).
type servingCerts struct {
	cur atomic.Pointer[tls.Certificate]
}

func (s *servingCerts) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.cur.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("no serving certificate")
}

// RotateAt is when a certificate valid from notBefore to notAfter is
// renewed: at 70% to 90% of its lifetime (frac in [0,1) picks where), as
// kubelet's certificate manager does.
func RotateAt(notBefore, notAfter time.Time, frac float64) time.Time {
	life := notAfter.Sub(notBefore)
	return notBefore.Add(time.Duration(float64(life) * (0.7 + 0.2*frac)))
}

// bootstrapper obtains serving certificates from the certificates API
// (signer kubernetes.io/kubelet-serving) and renews them before they
// expire, keeping the old certificate in use until the new one is issued.
type bootstrapper struct {
	client   CSRClient
	nodeName string
	dir      string
	// node returns the Node as last seen (its addresses become the SANs).
	node  func() *v1.Node
	certs *servingCerts
	clock clock.Clock
	log   *slog.Logger
	rand  func() float64
}

// loadCurrent returns the stored certificate when it is still valid.
func (b *bootstrapper) loadCurrent() (*tls.Certificate, bool) {
	p := filepath.Join(b.dir, servingCertFile)
	c, err := tls.LoadX509KeyPair(p, p)
	if err != nil || c.Leaf == nil || !b.clock.Now().Before(c.Leaf.NotAfter) {
		return nil, false
	}
	return &c, true
}

// run keeps a valid issued certificate in certs until ctx ends.
func (b *bootstrapper) run(ctx context.Context) {
	if c, ok := b.loadCurrent(); ok {
		b.certs.cur.Store(c)
	}
	for {
		var wait time.Duration
		if c := b.certs.cur.Load(); c != nil && c.Leaf != nil && b.issued(c) {
			wait = RotateAt(c.Leaf.NotBefore, c.Leaf.NotAfter, b.rand()).Sub(b.clock.Now())
		}
		if wait > 0 {
			b.log.Info("serving certificate valid", "notAfter", c0(b.certs.cur.Load()).NotAfter, "renewIn", wait.Round(time.Second))
			select {
			case <-ctx.Done():
				return
			case <-b.clock.After(wait):
			}
		}
		c, err := b.request(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			b.log.Warn("serving certificate request failed; retrying", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-b.clock.After(30 * time.Second):
			}
			continue
		}
		b.certs.cur.Store(c)
		b.log.Info("serving certificate issued", "notAfter", c.Leaf.NotAfter)
	}
}

func c0(c *tls.Certificate) *x509.Certificate {
	if c == nil || c.Leaf == nil {
		return &x509.Certificate{}
	}
	return c.Leaf
}

// issued tells whether c came from the certificates API (not self-signed).
func (b *bootstrapper) issued(c *tls.Certificate) bool {
	return c.Leaf.Issuer.String() != c.Leaf.Subject.String()
}

// request creates a CSR for the node's names and addresses, waits until it
// is approved and signed (an operator or a controller approves serving
// CSRs: `kubectl certificate approve`), stores and returns the certificate.
func (b *bootstrapper) request(ctx context.Context) (*tls.Certificate, error) {
	var node *v1.Node
	// The SANs are the Node's addresses: wait until it has reported them.
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) {
		node = b.node()
		return node != nil && len(node.Status.Addresses) > 0, nil
	})
	if err != nil {
		return nil, err
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + b.nodeName, Organization: []string{"system:nodes"}}}
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case v1.NodeHostName, v1.NodeInternalDNS, v1.NodeExternalDNS:
			tmpl.DNSNames = appendNew(tmpl.DNSNames, a.Address)
		case v1.NodeInternalIP, v1.NodeExternalIP:
			if ip := net.ParseIP(a.Address); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			}
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, fmt.Errorf("serving CSR: %w", err)
	}
	csr := &certv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
		Spec: certv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certv1.KubeletServingSignerName,
			Usages:     []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth},
		},
	}
	created, err := b.client.Create(ctx, csr, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create serving CSR: %w", err)
	}
	b.log.Info("serving certificate requested; waiting for approval", "csr", created.Name)
	var certPEM []byte
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := b.client.Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil // retried
		}
		for _, c := range got.Status.Conditions {
			if c.Type == certv1.CertificateDenied || c.Type == certv1.CertificateFailed {
				return false, fmt.Errorf("serving CSR %s %s: %s", got.Name, c.Type, c.Message)
			}
		}
		certPEM = got.Status.Certificate
		return len(certPEM) > 0, nil
	})
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("serving CSR %s: %w", created.Name, err)
	}
	if err := os.MkdirAll(b.dir, 0o700); err != nil {
		return nil, err
	}
	if err := pki.WriteFile(filepath.Join(b.dir, servingCertFile), append(append([]byte{}, certPEM...), keyPEM...), 0o600); err != nil {
		return nil, err
	}
	return &c, nil
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
