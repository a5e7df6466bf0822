package certificate

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nodeagent/nodeagent/internal/pki"
)

// timestampFormat names each stored pair, as kubelet's file store does.
const timestampFormat = "2006-01-02-15-04-05"

// ErrNoCertificate is returned by FileStore.Current when nothing is stored.
var ErrNoCertificate = errors.New("no certificate stored")

// FileStore keeps certificate/key pairs in a directory with kubelet's
// layout: <prefix>-<timestamp>.pem (certificate then key, mode 0600) and
// the symlink <prefix>-current.pem to the newest one.
type FileStore struct {
	dir    string
	prefix string
}

// NewFileStore returns the store of prefix ("kubelet-client",
// "kubelet-server") in dir.
func NewFileStore(dir, prefix string) *FileStore { return &FileStore{dir: dir, prefix: prefix} }

// CurrentPath is the path of the current pair: the symlink a kubeconfig
// names.
func (s *FileStore) CurrentPath() string {
	return filepath.Join(s.dir, s.prefix+"-current.pem")
}

// Current loads the current pair; ErrNoCertificate when there is none.
func (s *FileStore) Current() (*tls.Certificate, error) {
	p := s.CurrentPath()
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoCertificate
	}
	c, err := tls.LoadX509KeyPair(p, p)
	if err != nil {
		return nil, fmt.Errorf("certificate %s: %w", p, err)
	}
	return &c, nil
}

// Update stores a new pair as <prefix>-<now>.pem and points
// <prefix>-current.pem at it (a symlink renamed into place, so a reader
// sees the old pair or the new one, never none).
func (s *FileStore) Update(certPEM, keyPEM []byte, now time.Time) (*tls.Certificate, error) {
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("issued certificate does not match its key: %w", err)
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, err
	}
	name := filepath.Join(s.dir, s.prefix+"-"+now.UTC().Format(timestampFormat)+".pem")
	data := append(append([]byte{}, certPEM...), keyPEM...)
	if err := pki.WriteFile(name, data, 0o600); err != nil {
		return nil, err
	}
	updated := filepath.Join(s.dir, s.prefix+"-updated.pem")
	if err := os.Remove(updated); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := os.Symlink(name, updated); err != nil {
		return nil, err
	}
	if err := os.Rename(updated, s.CurrentPath()); err != nil {
		return nil, err
	}
	return &c, nil
}
