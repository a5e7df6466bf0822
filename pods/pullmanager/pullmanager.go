// Package pullmanager decides whether an image already on the node may be
// given to a pod without pulling it again, as kubelet does with
// KubeletEnsureSecretPulledImages: an image the agent pulled with a pod's
// pull secret is served to another pod only if that pod presents the same
// secret (same UID, namespace and name, or the same credentials), unless
// it was pulled with credentials every pod on the node has (the node's
// docker config, credential provider plugins) or none.
//
// Its state is kubelet's files under <rootDir>/image_manager: pulling/
// holds an ImagePullIntent per image being pulled (written before the
// pull, removed after it), pulled/ an ImagePulledRecord per image ID with
// the credentials each image name was pulled with; each file is named
// sha256-<hex of the image or image ID> and written atomically as JSON of
// kubelet.config.k8s.io/v1beta1. Secrets are recorded by coordinates and a
// SHA-256 of their credentials, never the credentials.
//
// Whether an image needs the check at all is the policy of
// imagePullCredentialsVerificationPolicy: NeverVerify,
// NeverVerifyPreloadedImages (kubelet's default: images the agent did not
// pull are served to anyone), NeverVerifyAllowlistedImages (those of
// preloadedImagesVerificationAllowlist only), AlwaysVerify.
//
// A Manager is safe for concurrent use.
package pullmanager

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/distribution/reference"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/atomicfile"
)

// Policy names (imagePullCredentialsVerificationPolicy).
const (
	NeverVerify                  = string(kubeletv1beta1.NeverVerify)
	NeverVerifyPreloadedImages   = string(kubeletv1beta1.NeverVerifyPreloadedImages)
	NeverVerifyAllowlistedImages = string(kubeletv1beta1.NeverVerifyAllowlistedImages)
	AlwaysVerify                 = string(kubeletv1beta1.AlwaysVerify)
)

// Policy says whether a pod asking for image must present credentials
// that were accepted for it; pulledByAgent is whether the agent pulled
// (or was pulling) it.
type Policy func(image string, pulledByAgent bool) bool

// NewPolicy is the policy of that name, with allowlist for
// NeverVerifyAllowlistedImages.
func NewPolicy(name string, allowlist []string) (Policy, error) {
	switch name {
	case NeverVerify:
		return func(string, bool) bool { return false }, nil
	case NeverVerifyPreloadedImages, "":
		return func(_ string, pulledByAgent bool) bool { return pulledByAgent }, nil
	case AlwaysVerify:
		return func(string, bool) bool { return true }, nil
	case NeverVerifyAllowlistedImages:
		exact := map[string]bool{}
		var prefixes []string
		for _, p := range allowlist {
			norm, wildcard, err := allowlistPattern(p)
			if err != nil {
				return nil, err
			}
			if wildcard {
				prefixes = append(prefixes, norm)
			} else {
				exact[norm] = true
			}
		}
		// As kubelet, the image is matched as the pod names it.
		return func(image string, _ bool) bool {
			if exact[image] {
				return false
			}
			for _, p := range prefixes {
				if strings.HasPrefix(image, p) {
					return false
				}
			}
			return true
		}, nil
	}
	return nil, fmt.Errorf("unknown image pull credential verification policy: %v", name)
}

// ValidateAllowlist checks preloadedImagesVerificationAllowlist's patterns
// as kubelet does: image names without tag or digest, or a prefix ending
// in "/*" that names at least a registry.
func ValidateAllowlist(patterns []string) error {
	for _, p := range patterns {
		if _, _, err := allowlistPattern(p); err != nil {
			return err
		}
	}
	return nil
}

func allowlistPattern(p string) (string, bool, error) {
	if p != strings.TrimSpace(p) {
		return "", false, fmt.Errorf("leading/trailing spaces are not allowed: %s", p)
	}
	trimmed, wildcard := p, false
	if strings.HasSuffix(p, "/*") {
		trimmed, wildcard = strings.TrimSuffix(p, "*"), true
	}
	switch {
	case trimmed == "":
		return "", false, fmt.Errorf("the supplied pattern is too short: %s", p)
	case strings.ContainsRune(trimmed, '*'):
		return "", false, fmt.Errorf("not a valid wildcard pattern, only patterns ending with '/*' are allowed: %s", p)
	case wildcard && len(trimmed) == 1:
		return "", false, errors.New("at least registry hostname is required")
	case wildcard:
		return trimmed, true, nil
	}
	named, err := reference.ParseNormalizedNamed(trimmed)
	if err != nil {
		return "", false, fmt.Errorf("failed to parse as an image name: %w", err)
	}
	if trimmed != named.Name() {
		return "", false, fmt.Errorf("neither tag nor digest is accepted in an image reference: %s", p)
	}
	return trimmed, false, nil
}

// Secret is a pull secret a pod presents, or one an image was pulled
// with: its coordinates and the hash of its credentials (CredentialHash).
type Secret = kubeletv1beta1.ImagePullSecret

// Credentials are what an image was pulled with: a pod's pull secret, or
// credentials every pod has (NodePodsAccessible: the node's, a plugin's,
// or none).
type Credentials = kubeletv1beta1.ImagePullCredentials

// CredentialHash is the hash recorded for a secret's credentials.
func CredentialHash(username, password string) string {
	h := sha256.Sum256([]byte(username + "\x00" + password))
	return hex.EncodeToString(h[:])
}

// Manager keeps the records.
type Manager struct {
	pullingDir, pulledDir string
	policy                Policy
	clock                 clock.Clock
	mu                    sync.Mutex
	intents               map[string]int // pulls under way per image
}

// New uses <rootDir>/image_manager.
func New(rootDir string, policy Policy, clk clock.Clock) (*Manager, error) {
	m := &Manager{
		pullingDir: filepath.Join(rootDir, "image_manager", "pulling"),
		pulledDir:  filepath.Join(rootDir, "image_manager", "pulled"),
		policy:     policy, clock: clk, intents: map[string]int{},
	}
	for _, d := range []string{m.pullingDir, m.pulledDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func fileName(s string) string {
	h := sha256.Sum256([]byte(s))
	return "sha256-" + hex.EncodeToString(h[:])
}

// RecordIntent notes that the agent is about to pull image (before the
// pull, so that a crash in between still counts the image as pulled by
// the agent).
func (m *Manager) RecordIntent(image string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, _ := json.Marshal(kubeletv1beta1.ImagePullIntent{TypeMeta: typeMeta("ImagePullIntent"), Image: image})
	if err := atomicfile.Write(filepath.Join(m.pullingDir, fileName(image)), data); err != nil {
		return fmt.Errorf("failed to record image pull intent: %w", err)
	}
	m.intents[image]++
	return nil
}

// RecordFailed ends an intent whose pull failed.
func (m *Manager) RecordFailed(image string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.endIntentLocked(image)
}

func (m *Manager) endIntentLocked(image string) {
	if m.intents[image] > 1 {
		m.intents[image]--
		return
	}
	if err := os.Remove(filepath.Join(m.pullingDir, fileName(image))); err == nil || errors.Is(err, os.ErrNotExist) {
		delete(m.intents, image)
	}
}

// RecordPulled records that image, whose ID is imageRef, was pulled with
// creds, and ends its intent. A record that cannot be written keeps the
// intent (the image still counts as pulled by the agent).
func (m *Manager) RecordPulled(image, imageRef string, creds Credentials) error {
	name, err := imageName(image)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, _, err := m.readPulled(imageRef)
	if err != nil || rec == nil {
		rec = &kubeletv1beta1.ImagePulledRecord{TypeMeta: typeMeta("ImagePulledRecord"), ImageRef: imageRef}
	}
	if rec.CredentialMapping == nil {
		rec.CredentialMapping = map[string]Credentials{}
	}
	rec.CredentialMapping[name] = merge(rec.CredentialMapping[name], creds)
	rec.LastUpdatedTime = metav1.NewTime(m.clock.Now())
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(m.pulledDir, fileName(imageRef)), data); err != nil {
		return fmt.Errorf("failed to write image pulled record: %w", err)
	}
	m.endIntentLocked(image)
	return nil
}

// merge adds creds to what an image name was pulled with: node-wide
// access wins over secrets; a secret with the coordinates of a recorded
// one replaces its hash (kubelet's merge).
func merge(old, creds Credentials) Credentials {
	if old.NodePodsAccessible || creds.NodePodsAccessible {
		return Credentials{NodePodsAccessible: true}
	}
	out := slices.Clone(old.KubernetesSecrets)
	for _, s := range creds.KubernetesSecrets {
		i := slices.IndexFunc(out, func(o Secret) bool { return o.UID == s.UID && o.Namespace == s.Namespace && o.Name == s.Name })
		if i >= 0 {
			out[i] = s
		} else {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b Secret) int {
		return strings.Compare(a.Namespace+"/"+a.Name+"/"+a.UID, b.Namespace+"/"+b.Name+"/"+b.UID)
	})
	return Credentials{KubernetesSecrets: out, KubernetesServiceAccounts: old.KubernetesServiceAccounts}
}

// MustPull reports whether a pod presenting podSecrets must pull image
// (whose ID on the node is imageRef, "" when absent) instead of using it:
// the policy asks for a check and the pod's secrets are not among those
// the image name was pulled with (by coordinates or by credentials). A
// secret matched by one but not the other is recorded, as kubelet does,
// so that the next check matches both. Unreadable records force the pull.
func (m *Manager) MustPull(image, imageRef string, podSecrets []Secret) bool {
	if imageRef == "" {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, exists, err := m.readPulled(imageRef)
	if err != nil {
		return true
	}
	pulledByAgent := exists || m.intents[image] > 0
	if !pulledByAgent {
		_, err := os.Stat(filepath.Join(m.pullingDir, fileName(image)))
		pulledByAgent = err == nil
	}
	if !m.policy(image, pulledByAgent) {
		return false
	}
	if rec == nil {
		return true
	}
	name, err := imageName(image)
	if err != nil {
		return true
	}
	cached, ok := rec.CredentialMapping[name]
	switch {
	case !ok:
		return true
	case cached.NodePodsAccessible:
		return false
	}
	for _, ps := range podSecrets {
		for _, cs := range cached.KubernetesSecrets {
			sameHash := cs.CredentialHash != "" && ps.CredentialHash == cs.CredentialHash
			sameSecret := ps.UID == cs.UID && ps.Namespace == cs.Namespace && ps.Name == cs.Name
			if sameHash || sameSecret {
				if !(sameHash && sameSecret) {
					rec.CredentialMapping[name] = merge(cached, Credentials{KubernetesSecrets: []Secret{ps}})
					if data, err := json.Marshal(rec); err == nil {
						_ = atomicfile.Write(filepath.Join(m.pulledDir, fileName(imageRef)), data)
					}
				}
				return !sameHash && !sameSecret
			}
		}
	}
	return true
}

// readPulled reads the record of imageRef (nil, false when there is none).
func (m *Manager) readPulled(imageRef string) (*kubeletv1beta1.ImagePulledRecord, bool, error) {
	data, err := os.ReadFile(filepath.Join(m.pulledDir, fileName(imageRef)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var rec kubeletv1beta1.ImagePulledRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		// A record that cannot be read still means the agent pulled it.
		return nil, true, nil
	}
	return &rec, true, nil
}

// imageName is image without tag or digest, normalised
// (docker.io/library/busybox), the key of a record's credential mapping.
func imageName(image string) (string, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", fmt.Errorf("invalid image name %q: %w", image, err)
	}
	return named.Name(), nil
}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: kubeletv1beta1.SchemeGroupVersion.String(), Kind: kind}
}
