package certificate

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/pki"
)

// CSRClient is what the manager needs of the certificates API.
type CSRClient interface {
	Create(ctx context.Context, csr *certv1.CertificateSigningRequest, opts metav1.CreateOptions) (*certv1.CertificateSigningRequest, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*certv1.CertificateSigningRequest, error)
}

// Why a request did not give a certificate (errors.Is).
var (
	// ErrDenied: the CSR was denied (by an operator or an approver).
	ErrDenied = errors.New("certificate signing request denied")
	// ErrFailed: the signer marked the CSR Failed.
	ErrFailed = errors.New("certificate signing request failed")
	// ErrNotApproved: nobody approved the CSR in time.
	ErrNotApproved = errors.New("certificate signing request not approved yet")
	// ErrNotIssued: the CSR is approved but no signer issued the
	// certificate in time (is kube-controller-manager's csrsigning
	// controller running, with --cluster-signing-* for the signer?).
	ErrNotIssued = errors.New("certificate signing request approved but not issued")
	// ErrUnauthorized: the API server rejected the credentials (an invalid
	// or expired bootstrap token, a certificate it does not trust).
	ErrUnauthorized = errors.New("credentials rejected by the API server (401 Unauthorized)")
	// ErrForbidden: the credentials may not create CSRs (bootstrap tokens
	// need the system:node-bootstrapper ClusterRole).
	ErrForbidden = errors.New("credentials may not create certificate signing requests (403 Forbidden)")
)

// Metrics are kubelet's certificate manager metrics; nil fields are not
// recorded.
type Metrics struct {
	// RenewErrors counts failed requests.
	RenewErrors interface{ Inc() }
}

// Config configures a Manager.
type Config struct {
	// Name is "client" or "serving", in logs and errors.
	Name string
	// SignerName is the CSR's spec.signerName.
	SignerName string
	// Template returns the request's subject and SANs; nil means "not known
	// yet" (the serving certificate waits for the Node's addresses).
	Template func() *x509.CertificateRequest
	// Usages are the CSR's key usages (for the ECDSA keys the manager
	// generates).
	Usages []certv1.KeyUsage
	// Store keeps the issued pairs.
	Store *FileStore
	// Initial is used while Store has no pair: the certificate of the
	// --kubeconfig. As kubelet, a certificate embedded in the kubeconfig is
	// replaced at once (InitialRotateNow), one in files is kept until its
	// renewal time.
	Initial          *tls.Certificate
	InitialRotateNow bool
	// Client returns the client to request certificates with: current is
	// the manager's certificate while it is valid, nil otherwise (then the
	// bootstrap credentials are used).
	Client func(current *tls.Certificate) (CSRClient, error)
	// Rotate renews a valid certificate at 70–90 % of its lifetime
	// (rotateCertificates); without it only a missing, expired or
	// mismatching certificate is requested.
	Rotate bool
	// PendingKeyFile keeps the private key of a request made without a
	// certificate (a bootstrap), so that a restart during the wait finds
	// the same CSR (its name is a digest of the key): kubelet's
	// kubelet-client.key.tmp. Empty: the key lives in memory only.
	PendingKeyFile string
	// OnRotate is called after a new certificate became current (switch
	// connections to it). May be nil.
	OnRotate func(*tls.Certificate)
	Metrics  Metrics
	Log      *slog.Logger
	Clock    clock.Clock
	// Rand returns a number in [0,1): where in 70–90 % a renewal falls.
	Rand func() float64
	// PollInterval is how often a pending CSR is read (default 2s);
	// WaitTimeout how long one request waits for its certificate (default
	// 15m, client-go's); Backoff spaces failed requests (default 2s
	// doubling to 2m, 10 % jitter).
	PollInterval time.Duration
	WaitTimeout  time.Duration
	Backoff      *wait.Backoff
}

// Manager keeps a certificate current (see the package documentation).
type Manager struct {
	cfg       Config
	cur       atomic.Pointer[tls.Certificate]
	rotations atomic.Int64

	mu      sync.Mutex
	problem error
	// frac places the current certificate's renewal in 70–90 %; drawn
	// once per certificate.
	frac    float64
	fracFor *x509.Certificate
	// rotateNow: the current certificate is the kubeconfig's embedded one.
	rotateNow bool
	// pendingKey is the key of a bootstrap request kept across retries.
	pendingKey crypto.Signer
}

// New loads the stored certificate (or cfg.Initial) and returns the
// manager; Run keeps it current.
func New(cfg Config) (*Manager, error) {
	if cfg.Store == nil || cfg.Client == nil || cfg.Template == nil || cfg.SignerName == "" {
		return nil, errors.New("certificate: Store, Client, Template and SignerName are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Rand == nil {
		cfg.Rand = mrand.Float64
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 2 * time.Second
	}
	if cfg.WaitTimeout <= 0 {
		cfg.WaitTimeout = 15 * time.Minute
	}
	if cfg.Backoff == nil {
		cfg.Backoff = &wait.Backoff{Duration: 2 * time.Second, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: 2 * time.Minute}
	}
	m := &Manager{cfg: cfg}
	c, err := cfg.Store.Current()
	switch {
	case err == nil:
		m.cur.Store(c)
	case errors.Is(err, ErrNoCertificate):
		if cfg.Initial != nil {
			m.cur.Store(cfg.Initial)
			m.rotateNow = cfg.InitialRotateNow
		}
	default:
		// A corrupt pair is replaced like a missing one.
		cfg.Log.Warn("stored certificate unusable; requesting a new one", "certificate", cfg.Name, "err", err)
		if cfg.Initial != nil {
			m.cur.Store(cfg.Initial)
			m.rotateNow = cfg.InitialRotateNow
		}
	}
	return m, nil
}

// Current is the certificate in use; nil before the first one.
func (m *Manager) Current() *tls.Certificate { return m.cur.Load() }

// GetClientCertificate is tls.Config.GetClientCertificate: the current
// certificate, or none (the API server then sees an anonymous client).
func (m *Manager) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	if c := m.cur.Load(); c != nil {
		return c, nil
	}
	return &tls.Certificate{}, nil
}

// Rotations counts certificates obtained since New.
func (m *Manager) Rotations() int64 { return m.rotations.Load() }

// Problem is why the manager has no new certificate yet: nil after a
// successful request or before any.
func (m *Manager) Problem() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.problem
}

func (m *Manager) setProblem(err error) {
	m.mu.Lock()
	m.problem = err
	m.mu.Unlock()
}

// Usable is the current certificate if it is valid at now, else nil.
func (m *Manager) Usable(now time.Time) *tls.Certificate {
	c := m.cur.Load()
	if c == nil || c.Leaf == nil || now.Before(c.Leaf.NotBefore) || !now.Before(c.Leaf.NotAfter) {
		return nil
	}
	return c
}

// RotationDeadline is when a certificate valid from notBefore to notAfter
// is renewed: at 70 % to 90 % of its lifetime, frac in [0,1) picks where
// (client-go's nextRotationDeadline).
func RotationDeadline(notBefore, notAfter time.Time, frac float64) time.Time {
	life := notAfter.Sub(notBefore)
	return notBefore.Add(time.Duration(float64(life) * (0.7 + 0.2*frac)))
}

// RenewAt decides when to request a certificate: now when there is none,
// when it is expired or not yet valid, when it does not satisfy the
// template, or when it must be replaced at once (rotateNow); otherwise at
// its rotation deadline, or — without rotation — at its expiry.
func RenewAt(leaf *x509.Certificate, tmpl *x509.CertificateRequest, now time.Time, frac float64, rotate, rotateNow bool) time.Time {
	switch {
	case leaf == nil, rotateNow, !now.Before(leaf.NotAfter), now.Before(leaf.NotBefore), !Satisfies(leaf, tmpl):
		return now
	case rotate:
		return RotationDeadline(leaf.NotBefore, leaf.NotAfter, frac)
	default:
		return leaf.NotAfter
	}
}

// Satisfies tells whether leaf has the template's subject (common name and
// organizations) and SANs (DNS names and IP addresses, as sets).
func Satisfies(leaf *x509.Certificate, tmpl *x509.CertificateRequest) bool {
	if leaf.Subject.CommonName != tmpl.Subject.CommonName || !sameSet(leaf.Subject.Organization, tmpl.Subject.Organization) {
		return false
	}
	if !sameSet(leaf.DNSNames, tmpl.DNSNames) {
		return false
	}
	ips := func(l []net.IP) []string {
		out := make([]string, 0, len(l))
		for _, ip := range l {
			out = append(out, ip.String())
		}
		return out
	}
	return sameSet(ips(leaf.IPAddresses), ips(tmpl.IPAddresses))
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// templateRecheck bounds a wait for a renewal, so that a changed template
// (new node addresses) is noticed.
const templateRecheck = 10 * time.Minute

// Run keeps a current certificate until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	log := m.cfg.Log.With("certificate", m.cfg.Name)
	backoff := *m.cfg.Backoff
	for ctx.Err() == nil {
		tmpl := m.cfg.Template()
		if tmpl == nil {
			m.sleep(ctx, time.Second)
			continue
		}
		now := m.cfg.Clock.Now()
		at := m.renewAt(tmpl, now)
		if d := at.Sub(now); d > 0 {
			log.Info("certificate valid", "notAfter", m.Current().Leaf.NotAfter, "renewIn", d.Round(time.Second))
			m.sleep(ctx, min(d, templateRecheck))
			continue
		}
		c, err := m.request(ctx, tmpl)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if m.cfg.Metrics.RenewErrors != nil {
				m.cfg.Metrics.RenewErrors.Inc()
			}
			m.setProblem(err)
			retry := backoff.Step()
			log.Warn("certificate request failed; retrying", "err", err, "retryIn", retry.Round(time.Second))
			m.sleep(ctx, retry)
			continue
		}
		backoff = *m.cfg.Backoff
		m.cur.Store(c)
		m.mu.Lock()
		m.rotateNow = false
		m.problem = nil
		m.mu.Unlock()
		m.rotations.Add(1)
		log.Info("certificate issued", "subject", c.Leaf.Subject.String(), "issuer", c.Leaf.Issuer.String(),
			"notBefore", c.Leaf.NotBefore, "notAfter", c.Leaf.NotAfter, "file", m.cfg.Store.CurrentPath())
		if m.cfg.OnRotate != nil {
			m.cfg.OnRotate(c)
		}
	}
}

// renewAt is RenewAt for the current certificate, with its frac drawn once.
func (m *Manager) renewAt(tmpl *x509.CertificateRequest, now time.Time) time.Time {
	c := m.Current()
	var leaf *x509.Certificate
	if c != nil {
		leaf = c.Leaf
	}
	m.mu.Lock()
	if leaf != nil && m.fracFor != leaf {
		m.fracFor, m.frac = leaf, m.cfg.Rand()
	}
	frac, now2 := m.frac, m.rotateNow
	m.mu.Unlock()
	return RenewAt(leaf, tmpl, now, frac, m.cfg.Rotate, now2)
}

func (m *Manager) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-m.cfg.Clock.After(d):
	}
}

// request sends one CSR and waits for its certificate.
func (m *Manager) request(ctx context.Context, tmpl *x509.CertificateRequest) (*tls.Certificate, error) {
	current := m.Usable(m.cfg.Clock.Now())
	client, err := m.cfg.Client(current)
	if err != nil {
		return nil, err
	}
	bootstrap := current == nil
	key, err := m.key(bootstrap)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, fmt.Errorf("%s CSR: %w", m.cfg.Name, err)
	}
	csr := &certv1.CertificateSigningRequest{
		Spec: certv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: m.cfg.SignerName,
			Usages:     m.cfg.Usages,
		},
	}
	if bootstrap && m.cfg.PendingKeyFile != "" {
		// kubelet's bootstrap names the CSR after its key and subject, so a
		// retry (or a restart) finds the one it created.
		csr.Name, err = digestedName(key.Public(), &tmpl.Subject, m.cfg.Usages)
		if err != nil {
			return nil, err
		}
	} else {
		csr.GenerateName = "csr-"
	}
	created, err := client.Create(ctx, csr, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) && csr.Name != "" {
		created, err = client.Get(ctx, csr.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, classify(fmt.Errorf("create %s CSR: %w", m.cfg.Name, err), err)
	}
	m.cfg.Log.Info("certificate requested; waiting for approval and issuance", "certificate", m.cfg.Name, "csr", created.Name,
		"signer", m.cfg.SignerName, "bootstrap", bootstrap)
	certPEM, err := m.wait(ctx, client, created.Name)
	if err != nil {
		if errors.Is(err, ErrDenied) || errors.Is(err, ErrFailed) {
			m.dropPendingKey() // the next request gets a new key and name
		}
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	c, err := m.cfg.Store.Update(certPEM, keyPEM, m.cfg.Clock.Now())
	if err != nil {
		return nil, fmt.Errorf("store %s certificate from CSR %s: %w", m.cfg.Name, created.Name, err)
	}
	m.dropPendingKey()
	return c, nil
}

// wait polls the CSR until it has a certificate, is denied or failed, or
// WaitTimeout passes; while it waits, Problem says what it waits for.
func (m *Manager) wait(ctx context.Context, client CSRClient, name string) ([]byte, error) {
	deadline := m.cfg.Clock.Now().Add(m.cfg.WaitTimeout)
	approved := false
	for {
		got, err := client.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("%s CSR %s was deleted while waiting for it", m.cfg.Name, name)
		case err != nil:
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			m.cfg.Log.Warn("reading CSR failed; retrying", "certificate", m.cfg.Name, "csr", name, "err", err)
		default:
			for _, c := range got.Status.Conditions {
				switch c.Type {
				case certv1.CertificateDenied:
					return nil, fmt.Errorf("%w: %s CSR %s: %s: %s", ErrDenied, m.cfg.Name, name, c.Reason, c.Message)
				case certv1.CertificateFailed:
					return nil, fmt.Errorf("%w: %s CSR %s: %s: %s", ErrFailed, m.cfg.Name, name, c.Reason, c.Message)
				case certv1.CertificateApproved:
					approved = true
				}
			}
			if len(got.Status.Certificate) > 0 {
				return got.Status.Certificate, nil
			}
		}
		why := fmt.Errorf("%w: %s CSR %s (signer %s)", ErrNotApproved, m.cfg.Name, name, m.cfg.SignerName)
		if approved {
			why = fmt.Errorf("%w: %s CSR %s: no certificate from signer %s yet (is kube-controller-manager's csrsigning controller running?)",
				ErrNotIssued, m.cfg.Name, name, m.cfg.SignerName)
		}
		m.setProblem(why)
		if !m.cfg.Clock.Now().Before(deadline) {
			return nil, fmt.Errorf("after %s: %w", m.cfg.WaitTimeout, why)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-m.cfg.Clock.After(m.cfg.PollInterval):
		}
	}
}

// key is a new ECDSA P-256 key (as client-go's manager generates), or for a
// bootstrap the pending one, kept in PendingKeyFile across retries and
// restarts.
func (m *Manager) key(bootstrap bool) (crypto.Signer, error) {
	if !bootstrap || m.cfg.PendingKeyFile == "" {
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pendingKey != nil {
		return m.pendingKey, nil
	}
	if b, err := os.ReadFile(m.cfg.PendingKeyFile); err == nil {
		if k, err := pki.DecodeKey(b); err == nil {
			m.pendingKey = k
			return k, nil
		}
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	b, err := pki.EncodeKey(k)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(m.cfg.PendingKeyFile), 0o700); err != nil {
		return nil, err
	}
	if err := pki.WriteFile(m.cfg.PendingKeyFile, b, 0o600); err != nil {
		return nil, err
	}
	m.pendingKey = k
	return k, nil
}

func (m *Manager) dropPendingKey() {
	m.mu.Lock()
	m.pendingKey = nil
	m.mu.Unlock()
	if m.cfg.PendingKeyFile != "" {
		_ = os.Remove(m.cfg.PendingKeyFile)
	}
}

// classify adds the sentinel for an API error the operator must act on.
func classify(wrapped, apiErr error) error {
	switch {
	case apierrors.IsUnauthorized(apiErr):
		return fmt.Errorf("%w: %w", ErrUnauthorized, wrapped)
	case apierrors.IsForbidden(apiErr):
		return fmt.Errorf("%w: %w", ErrForbidden, wrapped)
	}
	return wrapped
}

// digestedName is kubelet's bootstrap CSR name: node-csr- and a digest of
// the public key, subject and usages.
func digestedName(pub crypto.PublicKey, subject *pkix.Name, usages []certv1.KeyUsage) (string, error) {
	h := sha512.New512_256()
	enc := base64.RawURLEncoding.EncodeToString
	write := func(b []byte) { h.Write([]byte(enc(b))); h.Write([]byte{'|'}) }
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	write(der)
	write([]byte(subject.CommonName))
	for _, o := range subject.Organization {
		write([]byte(o))
	}
	for _, u := range usages {
		write([]byte(u))
	}
	return "node-csr-" + enc(h.Sum(nil)), nil
}
