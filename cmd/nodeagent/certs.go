package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	certv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/certificate"
	"github.com/nodeagent/nodeagent/config"
	"github.com/nodeagent/nodeagent/heartbeat"
	"github.com/nodeagent/nodeagent/internal/kubeclient"
)

// apiClients are the agent's API client configurations: main (informers,
// status, pods, Events: newKubeClients builds its clients from copies of
// it), the heartbeat's own, and the client certificate manager
// when the agent manages its certificate (nil: the kubeconfig's
// credentials are used as they are).
type apiClients struct {
	main, hb           *rest.Config
	onHeartbeatFailure func()
	certs              *certificate.Manager
	// setMain gives the manager the main client, which renews with the
	// current certificate.
	setMain func(*kubeclient.Clientset)
}

// newAPIClients loads the credentials. With a bootstrapKubeconfig or
// rotateCertificates, as kubelet: the certificate comes from the client
// certificate manager (TLS bootstrap when --kubeconfig is missing or its
// certificate unusable; rotation), every TLS handshake presents the
// current one, and a new one closes the main client's connections and the
// heartbeat's idle ones (the heartbeat never loses a renewal in flight).
func newAPIClients(cfg *config.NodeAgentConfiguration, nodeName string, renewInterval time.Duration, log *slog.Logger, clk clock.Clock, reg prometheus.Registerer) (*apiClients, error) {
	if cfg.BootstrapKubeconfig == "" && !cfg.RotateCertificates {
		main, err := loadKubeconfig(cfg.Kubeconfig)
		if err != nil {
			return nil, err
		}
		setContentType(main, cfg.ContentType)
		hb, onFailure, err := heartbeat.NewClientConfigs(main, renewInterval)
		if err != nil {
			return nil, err
		}
		return &apiClients{main: main, hb: hb, onHeartbeatFailure: onFailure}, nil
	}
	certDir := cfg.CertDirectory()
	store := certificate.NewFileStore(certDir, "kubelet-client")
	cc, err := certificate.LoadClientConfig(cfg.Kubeconfig, cfg.BootstrapKubeconfig, store, clk.Now())
	if err != nil {
		return nil, err
	}
	if cc.Bootstrapping {
		log.Info("TLS bootstrap: the kubeconfig is missing or its certificate unusable; requesting a client certificate with the bootstrap kubeconfig",
			"kubeconfig", cfg.Kubeconfig, "bootstrapKubeconfig", cfg.BootstrapKubeconfig, "certDir", certDir)
	} else if cc.Initial == nil {
		if _, err := store.Current(); err != nil {
			// A token or exec plugin: nothing to rotate (kubelet would drop
			// such credentials).
			log.Info("rotateCertificates: the kubeconfig has no client certificate; using its credentials as they are", "kubeconfig", cfg.Kubeconfig)
			cfg2 := *cfg
			cfg2.RotateCertificates, cfg2.BootstrapKubeconfig = false, ""
			return newAPIClients(&cfg2, nodeName, renewInterval, log, clk, reg)
		}
	}
	// As kubelet: the content type for every client, certificate requests
	// included.
	setContentType(cc.User, cfg.ContentType)
	setContentType(cc.Bootstrap, cfg.ContentType)
	out := &apiClients{main: cc.User}
	var (
		mu        sync.Mutex
		mainCSR   certificate.CSRClient
		bootCSR   certificate.CSRClient
		onRotate  func()
		bootstrap = cc.Bootstrap
	)
	out.setMain = func(c *kubeclient.Clientset) {
		mu.Lock()
		mainCSR = c.CertificateSigningRequests()
		mu.Unlock()
	}
	renewErrors := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kubelet_certificate_manager_client_expiration_renew_errors",
		Help: "Counter of certificate renewal errors.",
	})
	pendingKey := ""
	if cfg.BootstrapKubeconfig != "" {
		pendingKey = filepath.Join(certDir, certificate.PendingClientKeyFile)
	}
	m, err := certificate.New(certificate.Config{
		Name:       "client",
		SignerName: certv1.KubeAPIServerClientKubeletSignerName,
		Template: func() *x509.CertificateRequest {
			return &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}}}
		},
		// kubelet's usages for an ECDSA key (DefaultKubeletClientGetUsages).
		Usages:           []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth},
		Store:            store,
		Initial:          cc.Initial,
		InitialRotateNow: cc.Embedded && cfg.RotateCertificates,
		Rotate:           cfg.RotateCertificates,
		PendingKeyFile:   pendingKey,
		// With a valid certificate the main client (presenting it) asks;
		// without one, the bootstrap credentials (kubelet's certConfig).
		Client: func(current *tls.Certificate) (certificate.CSRClient, error) {
			mu.Lock()
			defer mu.Unlock()
			if current != nil && mainCSR != nil {
				return mainCSR, nil
			}
			if bootCSR == nil {
				c, err := kubeclient.NewForConfig(bootstrap)
				if err != nil {
					return nil, fmt.Errorf("bootstrap client: %w", err)
				}
				bootCSR = c.CertificateSigningRequests()
			}
			return bootCSR, nil
		},
		OnRotate: func(*tls.Certificate) { onRotate() },
		Metrics:  certificate.Metrics{RenewErrors: renewErrors},
		Log:      log.With("component", "certificate"),
		Clock:    clk,
	})
	if err != nil {
		return nil, err
	}
	out.certs = m
	reg.MustRegister(renewErrors)
	registerCertificateMetrics(reg, m, clk)
	var closeMain, closeHBIdle func()
	out.hb, out.onHeartbeatFailure, closeMain, closeHBIdle, err = rotatingClientConfigs(out.main, renewInterval, m.GetClientCertificate)
	if err != nil {
		return nil, err
	}
	onRotate = func() {
		log.Info("client certificate rotated; closing connections so that they use the new one")
		closeMain()
		closeHBIdle()
		// A renewal in flight kept its connection (still valid with the old
		// certificate): close it once idle.
		go func() {
			for range 3 {
				<-clk.After(renewInterval / 2)
				closeHBIdle()
			}
		}()
	}
	return out, nil
}

// rotatingClientConfigs sets main's transport to present getCert's
// certificate at every handshake, on a dialer whose connections closeMain
// closes, and makes the heartbeat's configuration
// (heartbeat.NewRotatingClientConfigs). Every client built from a copy of
// main (newKubeClients) shares that transport, so closeMain after a
// rotation moves them all to the new certificate.
func rotatingClientConfigs(main *rest.Config, renewInterval time.Duration, getCert func(*tls.CertificateRequestInfo) (*tls.Certificate, error)) (hb *rest.Config, onHeartbeatFailure, closeMain, closeHBIdle func(), err error) {
	return heartbeat.NewRotatingClientConfigs(main, renewInterval, getCert,
		func(c *rest.Config, dial func(ctx context.Context, network, address string) (net.Conn, error)) error {
			return certificate.UseClientCertificate(c, getCert, dial)
		})
}

// certificateReady is the client certificate's part of /readyz: without a
// valid certificate, why the manager has none yet.
func certificateReady(m *certificate.Manager, now time.Time) error {
	if m == nil || m.Usable(now) != nil {
		return nil
	}
	if p := m.Problem(); p != nil {
		return fmt.Errorf("no valid client certificate: %w", p)
	}
	return errors.New("no valid client certificate yet")
}

// registerCertificateMetrics registers kubelet's client certificate
// metrics for m.
func registerCertificateMetrics(reg prometheus.Registerer, m *certificate.Manager, clk clock.Clock) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kubelet_certificate_manager_client_ttl_seconds",
		Help: "Gauge of the TTL (time-to-live) of the client certificate. The value is in seconds until certificate expiry (negative if already expired). If client certificate is invalid or unused, the value will be +INF.",
	}, func() float64 {
		if c := m.Current(); c != nil && c.Leaf != nil {
			return math.Trunc(c.Leaf.NotAfter.Sub(clk.Now()).Seconds())
		}
		return math.Inf(1)
	}))
}

// servingCertMetrics registers kubelet's serving certificate renewal error
// counter (with serverTLSBootstrap).
func servingCertMetrics(reg prometheus.Registerer, on bool) certificate.Metrics {
	if !on {
		return certificate.Metrics{}
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kubelet_server_expiration_renew_errors",
		Help: "Counter of certificate renewal errors.",
	})
	reg.MustRegister(c)
	return certificate.Metrics{RenewErrors: c}
}
