package certificate

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// UseClientCertificate makes cfg present getCert's certificate at every TLS
// handshake, as kubelet's UpdateTransport: cfg gets its own transport
// dialing through dial (pass a connrotation dialer, so that a rotation can
// close every connection and the next requests handshake with the new
// certificate). cfg's own client certificate, if any, is dropped.
func UseClientCertificate(cfg *rest.Config, getCert func(*tls.CertificateRequestInfo) (*tls.Certificate, error),
	dial func(ctx context.Context, network, address string) (net.Conn, error)) error {
	if cfg.Transport != nil {
		return fmt.Errorf("client configuration already has a transport")
	}
	tlsCfg, err := rest.TLSConfigFor(rest.AnonymousClientConfig(cfg))
	if err != nil {
		return fmt.Errorf("client TLS: %w", err)
	}
	if tlsCfg == nil {
		tlsCfg = &tls.Config{}
	}
	tlsCfg.Certificates = nil
	tlsCfg.GetClientCertificate = getCert
	cfg.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsCfg,
		MaxIdleConnsPerHost: 25,
		DialContext:         dial,
	})
	cfg.Dial = nil
	cfg.TLSClientConfig = rest.TLSClientConfig{}
	return nil
}
