package nodeapi

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// User is an authenticated (or anonymous) requester.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Anonymous users, as the API server names them.
const (
	anonymousUser  = "system:anonymous"
	anonymousGroup = "system:unauthenticated"
)

// errUnauthorized is a request whose credentials are missing or invalid.
var errUnauthorized = errors.New("Unauthorized")

// authenticator implements kubelet's authentication chain.
type authenticator struct {
	clientCAs *x509.CertPool // nil: client certificates are not accepted
	tokens    *tokenReviewer // nil: bearer tokens are not accepted
	anonymous bool
	clock     clock.PassiveClock
}

// authenticate returns the requester, errUnauthorized, or another error
// when an upstream check failed (TokenReview unreachable: 401 too, but the
// cause is logged).
func (a *authenticator) authenticate(r *http.Request) (*User, error) {
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 && a.clientCAs != nil {
		certs := r.TLS.PeerCertificates
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		_, err := certs[0].Verify(x509.VerifyOptions{
			Roots:         a.clientCAs,
			Intermediates: inter,
			CurrentTime:   a.clock.Now(),
			KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		})
		if err != nil {
			return nil, fmt.Errorf("%w: client certificate: %w", errUnauthorized, err)
		}
		return &User{Name: certs[0].Subject.CommonName, Groups: append([]string{}, certs[0].Subject.Organization...)}, nil
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, _ := strings.Cut(h, " ")
		token = strings.TrimSpace(token)
		if !strings.EqualFold(scheme, "bearer") || token == "" || a.tokens == nil {
			return nil, fmt.Errorf("%w: unsupported credentials", errUnauthorized)
		}
		return a.tokens.review(r.Context(), token)
	}
	if a.anonymous {
		return &User{Name: anonymousUser, Groups: []string{anonymousGroup}}, nil
	}
	return nil, fmt.Errorf("%w: no credentials", errUnauthorized)
}

// ttlCache is a small map with expiring entries; it forgets everything when
// it grows past max (simpler than LRU, and the working set of a node's
// callers is small).
type ttlCache[V any] struct {
	mu    sync.Mutex
	clock clock.PassiveClock
	max   int
	m     map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	v       V
	expires time.Time
}

func newTTLCache[V any](c clock.PassiveClock) *ttlCache[V] {
	return &ttlCache[V]{clock: c, max: 4096, m: map[string]ttlEntry[V]{}}
}

func (c *ttlCache[V]) get(k string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || !c.clock.Now().Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (c *ttlCache[V]) put(k string, v V, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[k] = ttlEntry[V]{v: v, expires: c.clock.Now().Add(ttl)}
}

// tokenReviewer authenticates bearer tokens with TokenReview.
type tokenReviewer struct {
	client TokenReviewCreator
	ttl    time.Duration
	cache  *ttlCache[*User] // nil value: the token was rejected
}

func (t *tokenReviewer) review(ctx context.Context, token string) (*User, error) {
	sum := sha256.Sum256([]byte(token))
	key := string(sum[:])
	if u, ok := t.cache.get(key); ok {
		if u == nil {
			return nil, fmt.Errorf("%w: token rejected (cached)", errUnauthorized)
		}
		return u, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := t.client.Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		// Not cached: the next request asks again.
		return nil, fmt.Errorf("%w: TokenReview: %w", errUnauthorized, err)
	}
	if !res.Status.Authenticated {
		t.cache.put(key, nil, t.ttl)
		return nil, fmt.Errorf("%w: token rejected: %s", errUnauthorized, res.Status.Error)
	}
	ui := res.Status.User
	u := &User{Name: ui.Username, UID: ui.UID, Groups: ui.Groups}
	if len(ui.Extra) > 0 {
		u.Extra = map[string][]string{}
		for k, v := range ui.Extra {
			u.Extra[k] = v
		}
	}
	t.cache.put(key, u, t.ttl)
	return u, nil
}

// Attributes are what a request asks for, as kubelet maps it.
type Attributes struct {
	Verb         string
	Subresources []string // tried in order; any allowed lets the request in
}

// RequestAttributes maps a request to kubelet's verb and node
// subresources (pkg/kubelet/server/auth.go, KubeletFineGrainedAuthz on).
func RequestAttributes(method, path string) Attributes {
	var a Attributes
	switch method {
	case http.MethodPost:
		a.Verb = "create"
	case http.MethodGet:
		a.Verb = "get"
	case http.MethodPut:
		a.Verb = "update"
	case http.MethodPatch:
		a.Verb = "patch"
	case http.MethodDelete:
		a.Verb = "delete"
	}
	switch {
	case isSubpath(path, "/pods"), isSubpath(path, "/runningpods"):
		a.Subresources = append(a.Subresources, "pods")
	case isSubpath(path, "/healthz"):
		a.Subresources = append(a.Subresources, "healthz")
	case isSubpath(path, "/configz"):
		a.Subresources = append(a.Subresources, "configz")
	}
	switch {
	case isSubpath(path, "/stats"):
		a.Subresources = append(a.Subresources, "stats")
	case isSubpath(path, "/metrics"):
		a.Subresources = append(a.Subresources, "metrics")
	case isSubpath(path, "/logs"):
		a.Subresources = append(a.Subresources, "log")
	case isSubpath(path, "/checkpoint"):
		a.Subresources = append(a.Subresources, "checkpoint")
	case isSubpath(path, "/statusz"):
		a.Subresources = append(a.Subresources, "statusz")
	case isSubpath(path, "/flagz"):
		a.Subresources = append(a.Subresources, "configz")
	default:
		a.Subresources = append(a.Subresources, "proxy")
	}
	return a
}

// isSubpath is kubelet's: path itself or below it.
func isSubpath(subpath, path string) bool {
	path = strings.TrimSuffix(path, "/")
	return subpath == path || strings.HasPrefix(subpath, path) && len(subpath) > len(path) && subpath[len(path)] == '/'
}

// authorizer decides with SubjectAccessReview, or allows everyone.
type authorizer struct {
	alwaysAllow bool
	client      SubjectAccessReviewCreator
	nodeName    string
	allowTTL    time.Duration
	denyTTL     time.Duration
	cache       *ttlCache[bool]
}

// authorize tells whether u may do verb on the node's subresource.
func (z *authorizer) authorize(ctx context.Context, u *User, verb, subresource string) (bool, error) {
	if z.alwaysAllow {
		return true, nil
	}
	key := sarKey(u, verb, subresource)
	if ok, hit := z.cache.get(key); hit {
		return ok, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	spec := authzv1.SubjectAccessReviewSpec{
		User:   u.Name,
		UID:    u.UID,
		Groups: u.Groups,
		ResourceAttributes: &authzv1.ResourceAttributes{
			Verb:        verb,
			Version:     "v1",
			Resource:    "nodes",
			Subresource: subresource,
			Name:        z.nodeName,
		},
	}
	if len(u.Extra) > 0 {
		spec.Extra = map[string]authzv1.ExtraValue{}
		for k, v := range u.Extra {
			spec.Extra[k] = v
		}
	}
	res, err := z.client.Create(ctx, &authzv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("SubjectAccessReview: %w", err)
	}
	ok := res.Status.Allowed && !res.Status.Denied
	ttl := z.denyTTL
	if ok {
		ttl = z.allowTTL
	}
	z.cache.put(key, ok, ttl)
	return ok, nil
}

func sarKey(u *User, verb, subresource string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q %q %q %q %q", u.Name, u.UID, u.Groups, verb, subresource)
	keys := make([]string, 0, len(u.Extra))
	for k := range u.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " %q=%q", k, u.Extra[k])
	}
	return b.String()
}
