package heartbeat

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/http2"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// NewClientConfig builds the heartbeat's own API client configuration from
// base: its own connection (so other traffic cannot queue in front of it), no client-side
// rate limiting, and HTTP/2 health pings after renewInterval of silence, so a
// dead connection is detected within one renewal instead of client-go's
// default 30s+15s. closeIdle closes its idle connections; pass it as
// Options.OnRepeatedFailure. Build the Lease and Node clients from the
// returned config (with any typed client); they share the transport.
func NewClientConfig(base *rest.Config, renewInterval time.Duration) (config *rest.Config, closeIdle func(), err error) {
	return newClientConfig(base, renewInterval, nil)
}

// newClientConfig is NewClientConfig; a non-nil getCert supplies the
// client certificate at each handshake instead of base's (a rotating
// certificate).
func newClientConfig(base *rest.Config, renewInterval time.Duration, getCert func(*tls.CertificateRequestInfo) (*tls.Certificate, error)) (config *rest.Config, closeIdle func(), err error) {
	cfg := rest.CopyConfig(base)
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("heartbeat client TLS: %w", err)
	}
	if getCert != nil {
		if tlsCfg == nil {
			tlsCfg = &tls.Config{}
		}
		tlsCfg.Certificates = nil
		tlsCfg.GetClientCertificate = getCert
	}
	t := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSClientConfig:     tlsCfg,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 5 * time.Second,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	h2, err := http2.ConfigureTransports(t)
	if err != nil {
		return nil, nil, fmt.Errorf("heartbeat client HTTP/2: %w", err)
	}
	h2.ReadIdleTimeout = max(renewInterval, 5*time.Second)
	h2.PingTimeout = 5 * time.Second
	// The transport now carries TLS; client-go refuses a custom transport
	// with TLS options, and adds the auth wrappers itself.
	cfg.TLSClientConfig = rest.TLSClientConfig{}
	cfg.Transport = t
	cfg.Dial = nil // the transport dials; base's dialer serves other clients
	cfg.WrapTransport = base.WrapTransport
	cfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	cfg.QPS, cfg.Burst = -1, 0
	cfg.UserAgent = rest.DefaultKubernetesUserAgent() + " nodeagent-heartbeat"
	return cfg, t.CloseIdleConnections, nil
}
