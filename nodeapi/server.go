package nodeapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/nodeagent/nodeagent/certificate"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/runtime"
)

// Pods is what the server needs from the pod manager: the pods the agent
// runs (API pods bound to the node and static pods), from memory.
type Pods interface {
	GetPodByName(namespace, name string) (*v1.Pod, bool)
	GetPods() []*v1.Pod
}

// Containers lists the runtime's containers and inspects one (to tell
// whether a followed container still runs). InspectContainer's error
// matches runtime.ErrNotFound for a container that is gone.
//
// PodContainers are one pod's containers as the agent last saw them (the
// PLEG's cache, as kubelet's runtime cache): exec, attach and port-forward
// find their container there. Listing the runtime asks every shim for its
// task's state, which containerd reports as unknown when a shim is slow to
// answer (a busy node), and a running container would look stopped.
type Containers interface {
	ListContainers(ctx context.Context) ([]runtime.Container, error)
	InspectContainer(ctx context.Context, id string) (runtime.Container, error)
	PodContainers(ctx context.Context, uid types.UID) ([]runtime.Container, error)
}

// Options configure a Server.
type Options struct {
	NodeName string // required: the Node the SubjectAccessReviews name
	// Address and Port to listen on (Port 0 picks a free port: tests).
	Address string
	Port    int

	// TLSCertFile and TLSPrivateKeyFile, when set, are the serving
	// certificate; otherwise a self-signed one for Hosts is kept in CertDir.
	TLSCertFile, TLSPrivateKeyFile string
	CertDir                        string
	Hosts                          []string // the node's names and IPs
	// ServerTLSBootstrap (without TLSCertFile) requests the serving
	// certificate from the certificates API (signer
	// kubernetes.io/kubelet-serving) for the Node's addresses, stores it in
	// CertDir and renews it at 70–90% of its lifetime; the self-signed one
	// is served until the first is issued. Node returns the Node as last
	// seen.
	ServerTLSBootstrap bool
	// TLSCipherSuites are the suites offered for TLS 1.2 and below (nil:
	// Go's defaults); TLSMinVersion the lowest version (0: TLS 1.2),
	// kubelet's tlsCipherSuites and tlsMinVersion.
	TLSCipherSuites []uint16
	TLSMinVersion   uint16
	Node            func() *v1.Node

	// ClientCAFile verifies client certificates; "" accepts none.
	ClientCAFile string
	// Client is used for TokenReview, SubjectAccessReview and the serving
	// certificate's CSRs.
	Client                 *Client
	WebhookAuthentication  bool
	AuthenticationCacheTTL time.Duration
	Anonymous              bool
	// AuthorizationMode is "Webhook" or "AlwaysAllow".
	AuthorizationMode    string
	AuthorizedCacheTTL   time.Duration
	UnauthorizedCacheTTL time.Duration

	Pods       Pods
	Containers Containers
	// Exec runs commands in containers for /exec; nil answers 503.
	Exec Execer
	// StreamIdleTimeout closes an exec, attach or port-forward connection
	// that carried nothing for this long (kubelet's
	// streamingConnectionIdleTimeout); 0: DefaultStreamIdleTimeout,
	// negative: never.
	StreamIdleTimeout time.Duration
	// Attach copies /attach input to containers' stdin; nil drops the
	// input (output is still served).
	Attach StdinAttacher
	// StatsFsDir is the directory whose filesystem /stats/summary reports
	// as the node's (rootDir); "" reports none.
	StatsFsDir string
	// PodsDir holds each pod's directory (<rootDir>/pods): /stats/summary
	// reports the volumes in <PodsDir>/<uid>/volumes/<plugin>/<name>; "":
	// none.
	PodsDir string
	// PodVolumeStats are the stats of a pod's volumes that are set up
	// through the API server (persistentVolumeClaim, ephemeral, csi:
	// csi.Mounter.PodVolumeStats), for /stats/summary beside those in
	// PodsDir; nil: none.
	PodVolumeStats func(ctx context.Context, podUID string) []statsapi.VolumeStats
	// VolumeStatsAggPeriod is how long a volume's measured usage is
	// reused (kubelet's volumeStatsAggPeriod); 0:
	// DefaultVolumeStatsAggPeriod; negative: no volume stats.
	VolumeStatsAggPeriod time.Duration
	// ImageFs is the directory of the runtime's image filesystem and the
	// bytes its images take, for /stats/summary's runtime.imageFs (and
	// containerFs, the same filesystem with containerd); nil: none.
	ImageFs func(ctx context.Context) (dir string, usedBytes uint64, err error)
	// CgroupMounts are the cgroup hierarchies /metrics/resource reads;
	// nil: the host's mounted cgroup and cgroup2 filesystems.
	CgroupMounts []string
	// PSI: the feature gate KubeletPSI (on by default in kubelet 1.34):
	// pressure stall information in /stats/summary (cpu.psi, memory.psi,
	// io) and cAdvisor's container_pressure_* families in
	// /metrics/cadvisor, as kubelet serves them.
	PSI bool
	// ProcDir is where procfs is mounted (/proc): /metrics/cadvisor reads
	// network counters from <ProcDir>/<pid>/net/dev and the machine from
	// cpuinfo and meminfo; tests point it at a fake tree.
	ProcDir string
	// NetNSDir holds the pods' network namespaces (<dir>/<pod UID>) for
	// /portForward; default /run/nodeagent/netns.
	NetNSDir string
	// LogRoot is the directory of pod log directories (podLogsDir).
	LogRoot string
	// LegacyLogRoots are searched after LogRoot, in order: where older
	// agents kept pod log directories (rootDir/logs), which the loggers
	// of containers they started still write after an upgrade.
	LegacyLogRoots []string
	// Healthy is /healthz's syncloop check (kubelet's SyncLoopHealthCheck:
	// the pod sync loop passed within max(2 × syncFrequency, 5 minutes));
	// nil means always healthy.
	Healthy func() error
	// FlushLogs is /healthz's log check: it returns once the log output
	// takes writes (kubelet's klog.Flush); logging is reported blocked
	// when it has not returned for two minutes. nil: never blocked.
	FlushLogs func()
	// Debug switches kubelet's debugging handlers; nil:
	// DefaultDebugOptions.
	Debug *DebugOptions
	// Metrics serves /metrics: the agent's own Prometheus metrics, as
	// kubelet serves its own there (nodes/metrics); nil: not served.
	Metrics http.Handler
	// ProbeMetrics serves /metrics/probes: kubelet's prober_* metrics
	// (nodes/metrics); nil: not served.
	ProbeMetrics http.Handler
	// Configz is the configuration /configz serves, as kubelet's
	// ({"kubeletconfig": ...}; nodes/configz); nil: not served.
	Configz func() ([]byte, error)

	// ServingCertMetrics count failed serving certificate requests
	// (serverTLSBootstrap).
	ServingCertMetrics certificate.Metrics

	Logger *slog.Logger
	Clock  clock.Clock
}

// Server is the node API server.
type Server struct {
	opts  Options
	log   *slog.Logger
	authn *authenticator
	authz *authorizer
	mux   *http.ServeMux
	// readOnly is kubelet's read-only server's (readOnlyPort): plain HTTP,
	// no authentication, no debugging handlers.
	readOnly *http.ServeMux
	tls      *tls.Config
	certs    *servingCerts
	rates    cpuRates // for /stats/summary's usageNanoCores

	cadvisor cadvisorState
	du       duCache // volume usage for /stats/summary
}

// NewReadOnly validates the options a server needs to answer requests and
// returns a server that can only ServeReadOnly (kubelet's readOnlyPort
// without its authenticated server: enableServer false).
func NewReadOnly(opts Options) (*Server, error) {
	if opts.NodeName == "" {
		return nil, errors.New("nodeapi: node name is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.NetNSDir == "" {
		opts.NetNSDir = "/run/nodeagent/netns"
	}
	if opts.Pods == nil {
		return nil, errors.New("nodeapi: pods are required")
	}
	s := &Server{opts: opts, log: opts.Logger}
	s.readOnly = http.NewServeMux()
	s.installUnauthenticated(s.readOnly)
	// kubelet's read-only server is its server without authentication
	// and without the debugging handlers (enableDebuggingHandlers off).
	s.installDebugging(s.readOnly, DebugOptions{})
	return s, nil
}

// New validates the options, loads or creates the serving certificate and
// the client CA bundle, and returns a server ready to Run.
func New(opts Options) (*Server, error) {
	s, err := NewReadOnly(opts)
	if err != nil {
		return nil, err
	}
	opts = s.opts
	s.authn = &authenticator{anonymous: opts.Anonymous, clock: opts.Clock}
	if opts.ClientCAFile != "" {
		b, err := os.ReadFile(opts.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("nodeapi: authentication.x509.clientCAFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("nodeapi: authentication.x509.clientCAFile %s: no PEM certificate", opts.ClientCAFile)
		}
		s.authn.clientCAs = pool
	}
	needClient := opts.WebhookAuthentication || opts.AuthorizationMode != "AlwaysAllow"
	if needClient && opts.Client == nil {
		return nil, errors.New("nodeapi: an API client is required for webhook authentication or authorization")
	}
	if opts.WebhookAuthentication && opts.Client.TokenReviews == nil {
		return nil, errors.New("nodeapi: webhook authentication needs Client.TokenReviews")
	}
	if needClient && opts.AuthorizationMode != "AlwaysAllow" && opts.Client.SubjectAccessReviews == nil {
		return nil, errors.New("nodeapi: webhook authorization needs Client.SubjectAccessReviews")
	}
	if opts.WebhookAuthentication {
		s.authn.tokens = &tokenReviewer{client: opts.Client.TokenReviews, ttl: opts.AuthenticationCacheTTL, cache: newTTLCache[*User](opts.Clock)}
	}
	switch opts.AuthorizationMode {
	case "AlwaysAllow":
		s.authz = &authorizer{alwaysAllow: true}
	case "Webhook", "":
		s.authz = &authorizer{client: opts.Client.SubjectAccessReviews, nodeName: opts.NodeName, allowTTL: opts.AuthorizedCacheTTL,
			denyTTL: opts.UnauthorizedCacheTTL, cache: newTTLCache[bool](opts.Clock)}
	default:
		return nil, fmt.Errorf("nodeapi: unknown authorization mode %q", opts.AuthorizationMode)
	}

	var cert tls.Certificate
	if opts.TLSCertFile != "" {
		cert, err = tls.LoadX509KeyPair(opts.TLSCertFile, opts.TLSPrivateKeyFile)
		if err != nil {
			return nil, fmt.Errorf("nodeapi: tlsCertFile/tlsPrivateKeyFile: %w", err)
		}
	} else {
		if opts.CertDir == "" {
			return nil, errors.New("nodeapi: a certificate directory is required without tlsCertFile")
		}
		cert, err = loadOrCreateSelfSigned(opts.CertDir, opts.Hosts, opts.Clock.Now())
		if err != nil {
			return nil, fmt.Errorf("nodeapi: %w", err)
		}
	}
	s.certs = &servingCerts{}
	s.certs.cur.Store(&cert)
	if opts.ServerTLSBootstrap && opts.TLSCertFile == "" {
		if opts.Client == nil || opts.Client.CertificateSigningRequests == nil || opts.Node == nil {
			return nil, errors.New("nodeapi: serverTLSBootstrap needs an API client and the Node")
		}
		if s.certs.mgr, err = newServingManager(opts, s.log.With("component", "servingcert")); err != nil {
			return nil, fmt.Errorf("nodeapi: %w", err)
		}
	}
	minTLS := opts.TLSMinVersion
	if minTLS == 0 {
		minTLS = tls.VersionTLS12 // kubelet's default
	}
	// One config for the server's life: a rotated serving certificate
	// (GetCertificate) keeps these restrictions.
	s.tls = &tls.Config{
		GetCertificate: s.certs.get,
		// Verified by the authenticator, so that a bad certificate gets
		// a 401 like kubelet's rather than a failed handshake.
		ClientAuth:   tls.RequestClientCert,
		MinVersion:   minTLS,
		CipherSuites: opts.TLSCipherSuites,
		NextProtos:   []string{"h2", "http/1.1"},
	}

	s.mux = http.NewServeMux()
	s.installUnauthenticated(s.mux)
	debug := DefaultDebugOptions()
	if opts.Debug != nil {
		debug = *opts.Debug
	}
	s.installDebugging(s.mux, debug)
	return s, nil
}

// installUnauthenticated installs the handlers kubelet serves on both its
// servers (its InstallAuthNotRequiredHandlers): /healthz, /pods,
// /stats/summary and the metrics endpoints.
func (s *Server) installUnauthenticated(mux *http.ServeMux) {
	installHealthz(mux, s.log, s.healthChecks())
	mux.HandleFunc("GET /pods", s.pods)
	mux.HandleFunc("GET /pods/{$}", s.pods)
	mux.HandleFunc("GET /metrics/resource", s.metricsResource)
	mux.HandleFunc("GET /metrics/cadvisor", s.metricsCadvisor)
	mux.HandleFunc("GET /stats/summary", s.statsSummary)
	if s.opts.Metrics != nil {
		mux.Handle("GET /metrics", s.opts.Metrics)
	}
	if s.opts.ProbeMetrics != nil {
		mux.Handle("GET /metrics/probes", s.opts.ProbeMetrics)
	}
}

// Handler is the authenticated, authorized mux (tests serve it directly).
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serve) }

// Run listens and serves until ctx ends. ready, when not nil, receives the
// listener's address once it listens.
func (s *Server) Run(ctx context.Context, ready func(net.Addr)) error {
	ln, err := s.Listen()
	if err != nil {
		return err
	}
	if ready != nil {
		ready(ln.Addr())
	}
	return s.Serve(ctx, ln)
}

// Listen opens the server's address (so that a port in use fails the
// agent's start, as kubelet's does).
func (s *Server) Listen() (net.Listener, error) {
	addr := net.JoinHostPort(s.opts.Address, strconv.Itoa(s.opts.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("nodeapi: listen %s: %w (set port to a free port, or 0 to disable the node API)", addr, err)
	}
	return ln, nil
}

// Serve serves HTTPS on ln until ctx ends; open requests (log follows) are
// cut then.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.tls == nil {
		return errors.New("nodeapi: a read-only server (NewReadOnly) serves only ServeReadOnly")
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		TLSConfig:         s.tls,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	if s.certs.mgr != nil {
		go s.certs.mgr.Run(ctx)
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		_ = srv.Close()
	}()
	s.log.Info("node API listening", "address", ln.Addr().String())
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("nodeapi: %w", err)
	}
	return nil
}

// ReadOnlyHandler is the read-only server's mux (tests serve it directly).
func (s *Server) ReadOnlyHandler() http.Handler { return s.readOnly }

// ListenReadOnly opens address:port for the read-only server (kubelet's
// readOnlyPort on its address), so that a port in use fails the agent's
// start.
func (s *Server) ListenReadOnly(port int) (net.Listener, error) {
	addr := net.JoinHostPort(s.opts.Address, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("nodeapi: listen %s: %w (set readOnlyPort to a free port, or 0 to disable the read-only server)", addr, err)
	}
	return ln, nil
}

// ServeReadOnly serves kubelet's read-only server on ln until ctx ends:
// plain HTTP, every request let in without authentication or
// authorization, the handlers of installUnauthenticated and, as kubelet,
// 405 "Debug endpoints are disabled." on its debugging paths.
func (s *Server) ServeReadOnly(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.readOnly,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       90 * time.Second, // kubelet's
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		_ = srv.Close()
	}()
	s.log.Info("node API read-only server listening (no authentication)", "address", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("nodeapi: read-only server: %w", err)
	}
	return nil
}

// serve authenticates and authorizes a request, then dispatches it.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	u, err := s.authn.authenticate(r)
	if err != nil {
		s.log.Debug("node API request unauthenticated", "path", r.URL.Path, "err", err)
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	attrs := RequestAttributes(r.Method, r.URL.Path)
	allowed := false
	for _, sub := range attrs.Subresources {
		ok, err := s.authz.authorize(r.Context(), u, attrs.Verb, sub)
		if err != nil {
			s.log.Warn("node API authorization failed", "user", u.Name, "path", r.URL.Path, "err", err)
			http.Error(w, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=nodes, subresource=%s)", u.Name, attrs.Verb, sub), http.StatusInternalServerError)
			return
		}
		if ok {
			allowed = true
			break
		}
	}
	if !allowed {
		// kubelet's message.
		msg := fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)", u.Name, attrs.Verb, attrs.Subresources)
		s.log.Debug("node API request forbidden", "user", u.Name, "path", r.URL.Path)
		http.Error(w, msg, http.StatusForbidden)
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) pods(w http.ResponseWriter, _ *http.Request) {
	list := v1.PodList{}
	list.Kind, list.APIVersion = "PodList", "v1"
	for _, p := range s.opts.Pods.GetPods() {
		list.Items = append(list.Items, *p)
	}
	if list.Items == nil {
		list.Items = []v1.Pod{}
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(&list); err != nil {
		s.log.Debug("node API: writing /pods", "err", err)
	}
}
