package nodeapi

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"

	certv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/certificate"
)

// servingCertPrefix is kubelet's name for bootstrapped serving
// certificates in the certificate directory: kubelet-server-<time>.pem and
// the kubelet-server-current.pem symlink (certificate.FileStore).
const servingCertPrefix = "kubelet-server"

// servingCerts holds the certificate the server presents; it can change
// while the server runs (TLS handshakes read it): the manager's once it has
// one, else cur (tlsCertFile's or the self-signed one).
type servingCerts struct {
	cur atomic.Pointer[tls.Certificate]
	mgr *certificate.Manager // nil without serverTLSBootstrap
}

func (s *servingCerts) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if s.mgr != nil {
		if c := s.mgr.Current(); c != nil {
			return c, nil
		}
	}
	if c := s.cur.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("no serving certificate")
}

// newServingManager is kubelet's serving certificate manager: CSRs for
// signer kubernetes.io/kubelet-serving with the Node's addresses as SANs,
// renewed at 70–90 % of the lifetime and whenever the addresses change.
// Serving CSRs must be approved by an operator or an approver controller
// (kube-controller-manager does not approve them).
func newServingManager(opts Options, log *slog.Logger) (*certificate.Manager, error) {
	return certificate.New(certificate.Config{
		Name:       "serving",
		SignerName: certv1.KubeletServingSignerName,
		Usages:     []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth},
		Store:      certificate.NewFileStore(opts.CertDir, servingCertPrefix),
		Rotate:     true,
		Template:   func() *x509.CertificateRequest { return servingTemplate(opts.NodeName, opts.Node()) },
		Client: func(*tls.Certificate) (certificate.CSRClient, error) {
			return opts.Client.CertificateSigningRequests, nil
		},
		Log:     log,
		Clock:   opts.Clock,
		Metrics: opts.ServingCertMetrics,
	})
}

// servingTemplate is the serving CSR for node: kubelet's subject, the
// Node's host names and IP addresses as SANs; nil until it has addresses.
func servingTemplate(nodeName string, node *v1.Node) *x509.CertificateRequest {
	if node == nil {
		return nil
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}}}
	seenIP := map[string]bool{}
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case v1.NodeHostName, v1.NodeInternalDNS, v1.NodeExternalDNS:
			if a.Address != "" {
				tmpl.DNSNames = appendNew(tmpl.DNSNames, a.Address)
			}
		case v1.NodeInternalIP, v1.NodeExternalIP:
			if ip := net.ParseIP(a.Address); ip != nil && !seenIP[ip.String()] {
				seenIP[ip.String()] = true
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			}
		}
	}
	if len(tmpl.DNSNames) == 0 && len(tmpl.IPAddresses) == 0 {
		return nil
	}
	return tmpl
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
