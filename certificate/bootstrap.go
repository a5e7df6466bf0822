package certificate

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// PendingClientKeyFile is kubelet's name for the key of a bootstrap request
// not yet answered, in the certificate directory.
const PendingClientKeyFile = "kubelet-client.key.tmp"

// ClientConfigs are the agent's credentials, decided by LoadClientConfig.
type ClientConfigs struct {
	// User is the API server, CA and TLS settings without credentials:
	// the agent's clients present the manager's certificate.
	User *rest.Config
	// Bootstrap requests a certificate while there is no valid one: the
	// --bootstrap-kubeconfig's credentials, or the --kubeconfig's own.
	Bootstrap *rest.Config
	// Initial is the --kubeconfig's client certificate when it has one;
	// Embedded when it is inline data (kubelet replaces such a
	// certificate at once: kubeadm's high-powered initial credentials).
	Initial  *tls.Certificate
	Embedded bool
	// Bootstrapping: the --kubeconfig was missing or unusable and has been
	// (re)written to name Store's current pair.
	Bootstrapping bool
}

// LoadClientConfig decides the agent's credentials as kubelet's
// LoadClientConfig does. Without a bootstrap kubeconfig the --kubeconfig is
// used as it is. With one, a --kubeconfig whose client certificate is
// valid at now is used; otherwise it is rewritten to name the store's
// current pair (kubelet-client-current.pem) with the bootstrap
// kubeconfig's server and CA, and the bootstrap credentials request the
// first certificate.
func LoadClientConfig(kubeconfigPath, bootstrapPath string, store *FileStore, now time.Time) (*ClientConfigs, error) {
	if bootstrapPath == "" || KubeconfigValid(kubeconfigPath, now) == nil {
		cfg, err := loadREST(kubeconfigPath)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfigPath, err)
		}
		out := &ClientConfigs{User: rest.AnonymousClientConfig(cfg), Bootstrap: cfg}
		out.Initial, out.Embedded = clientCert(cfg)
		return out, nil
	}
	boot, err := loadREST(bootstrapPath)
	if err != nil {
		return nil, fmt.Errorf("bootstrap kubeconfig %s: %w", bootstrapPath, err)
	}
	user := rest.AnonymousClientConfig(boot)
	if err := WriteKubeconfig(kubeconfigPath, user, store.CurrentPath()); err != nil {
		return nil, err
	}
	return &ClientConfigs{User: user, Bootstrap: boot, Bootstrapping: true}, nil
}

// KubeconfigValid is nil when path is a kubeconfig whose client
// certificate is valid at now (kubelet's isClientConfigStillValid), else
// why not.
func KubeconfigValid(path string, now time.Time) error {
	if _, err := os.Stat(path); err != nil {
		return err
	}
	cfg, err := loadREST(path)
	if err != nil {
		return err
	}
	c, _ := clientCert(cfg)
	if c == nil {
		return errors.New("no usable client certificate")
	}
	if now.After(c.Leaf.NotAfter) {
		return fmt.Errorf("client certificate expired at %s", c.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// clientCert loads cfg's client certificate; embedded is true for inline
// data.
func clientCert(cfg *rest.Config) (c *tls.Certificate, embedded bool) {
	certPEM, keyPEM := cfg.CertData, cfg.KeyData
	embedded = len(certPEM) > 0
	var err error
	if len(certPEM) == 0 && cfg.CertFile != "" {
		if certPEM, err = os.ReadFile(cfg.CertFile); err != nil {
			return nil, false
		}
	}
	if len(keyPEM) == 0 && cfg.KeyFile != "" {
		if keyPEM, err = os.ReadFile(cfg.KeyFile); err != nil {
			return nil, false
		}
	}
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return nil, false
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, false
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, false
		}
	}
	return &pair, embedded
}

// WriteKubeconfig writes the kubeconfig kubelet writes after a bootstrap:
// cfg's server and CA, and pemPath as client certificate and key.
func WriteKubeconfig(path string, cfg *rest.Config, pemPath string) error {
	var caData []byte
	if cfg.CAFile == "" {
		caData = cfg.CAData
	}
	kc := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"default-cluster": {
			Server: cfg.Host, InsecureSkipTLSVerify: cfg.Insecure,
			CertificateAuthority: cfg.CAFile, CertificateAuthorityData: caData,
		}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{"default-auth": {ClientCertificate: pemPath, ClientKey: pemPath}},
		Contexts: map[string]*clientcmdapi.Context{"default-context": {
			Cluster: "default-cluster", AuthInfo: "default-auth", Namespace: "default",
		}},
		CurrentContext: "default-context",
	}
	if err := clientcmd.WriteToFile(kc, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

func loadREST(path string) (*rest.Config, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	return clientcmd.BuildConfigFromFlags("", path)
}
