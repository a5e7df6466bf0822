package heartbeat

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
)

// NewClientConfigs wires an agent's API connections for the heartbeat, as
// kubelet does: main (the config the agent's main client will be built
// from) gets a dialer that tracks its connections, the heartbeat gets its
// own config and connection (NewClientConfig), and onRepeatedFailure, to
// pass as Options.OnRepeatedFailure, closes the heartbeat's idle
// connections and every one of the main client's, watches included: a
// watch or a status write on a silently dead connection would otherwise
// wait for HTTP/2's 30s+15s health check. Call it before building the
// main client from main; cmd/nodeagent and the fleet simulator share it.
func NewClientConfigs(main *rest.Config, renewInterval time.Duration) (hb *rest.Config, onRepeatedFailure func(), err error) {
	dialer := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	main.Dial = dialer.DialContext
	hb, closeIdle, err := NewClientConfig(main, renewInterval)
	if err != nil {
		return nil, nil, err
	}
	return hb, func() { closeIdle(); dialer.CloseAll() }, nil
}

// NewRotatingClientConfigs is NewClientConfigs for a client certificate
// that changes while the agent runs (certificate rotation): main must carry
// no client credentials of its own (rest.AnonymousClientConfig), and both
// clients present getCert's certificate at every TLS handshake. useMain
// sets main's transport (certificate.UseClientCertificate) with the dialer
// whose connections onRepeatedFailure and closeMain close. After a
// rotation call closeMain (every main connection, watches included, as
// kubelet's UpdateTransport does) and closeHBIdle: only the heartbeat's
// idle connections close, so a renewal in flight is never cut; its
// connection, still valid with the old certificate, is closed by a later
// closeHBIdle.
func NewRotatingClientConfigs(main *rest.Config, renewInterval time.Duration,
	getCert func(*tls.CertificateRequestInfo) (*tls.Certificate, error),
	useMain func(main *rest.Config, dial func(ctx context.Context, network, address string) (net.Conn, error)) error,
) (hb *rest.Config, onRepeatedFailure, closeMain, closeHBIdle func(), err error) {
	hb, closeIdle, err := newClientConfig(main, renewInterval, getCert)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	dialer := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	if err := useMain(main, dialer.DialContext); err != nil {
		return nil, nil, nil, nil, err
	}
	// CloseAll alone leaves a closed idle connection in the transport's
	// pool until its read loop notices, and a request in that window fails
	// with "use of closed network connection": take the idle ones out of
	// the pool first, then close everything (watches included).
	closeAll := func() {
		if t, ok := main.Transport.(interface{ CloseIdleConnections() }); ok {
			t.CloseIdleConnections()
		}
		dialer.CloseAll()
	}
	return hb, func() { closeIdle(); closeAll() }, closeAll, closeIdle, nil
}
