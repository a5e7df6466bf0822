package volume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/kubetypes"
)

const (
	// tokenMaxAge: a token older than this is refreshed whatever its
	// lifetime (kubelet's maxTTL).
	tokenMaxAge = 24 * time.Hour

	// tokenRetry is when a failed refresh is tried again while the cached
	// token is still valid.
	tokenRetry = 10 * time.Second

	// tokenGCPeriod is how often expired tokens are dropped (kubelet's
	// gcPeriod).
	tokenGCPeriod = time.Minute
)

// Tokens is the agent's cache of service account tokens bound to pods, as
// kubelet's token manager (pkg/kubelet/token): one cache for the
// serviceAccountToken sources of projected volumes and the tokenRequests
// of CSI drivers, keyed as kubelet keys it (service account, audience,
// expirationSeconds, the pod the token is bound to), so the same request
// is served by the same token. A token is requested when none is cached
// or the cached one is due for refresh: once 80% of its lifetime has
// passed or it is 24 hours old, whichever comes first (kubelet's rule,
// without its jitter). When a refresh fails the cached token is kept
// while it has not expired, and the refresh is tried again after
// tokenRetry.
//
// It requests with the node's credentials: under the Node authorizer and
// the NodeRestriction admission these may request tokens only for the
// service accounts of pods bound to the node, bound to the pod, and (with
// ServiceAccountNodeAudienceRestriction, on by default since 1.33) only
// for audiences the pod's volumes name.
type Tokens struct {
	client ServiceAccountsGetter // nil: no API server
	clock  clock.Clock
	log    *slog.Logger

	mu     sync.Mutex
	cache  map[tokenKey]cachedToken
	lastGC time.Time
	flight singleflight.Group // requests in progress, by key
}

// tokenKey is what kubelet's keyFunc keys a token by.
type tokenKey struct {
	namespace, serviceAccount string
	audience                  string // "": none (the API server's audiences)
	expirationSeconds         int64  // 0: unset (the API server's default)
	pod                       types.UID
	podName                   string
}

// String is kubelet's cache key (keyFunc), which its refresh error names.
func (k tokenKey) String() string {
	auds := []string{}
	if k.audience != "" {
		auds = []string{k.audience}
	}
	ref := authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: k.podName, UID: k.pod}
	return fmt.Sprintf("%q/%q/%#v/%#v/%#v/%q", k.serviceAccount, k.namespace, auds, k.expirationSeconds, ref, types.UID(""))
}

type cachedToken struct {
	token     string
	expiresAt time.Time
	refreshAt time.Time // request a new token from then on
}

// Token is a service account token and when it expires and is due for
// refresh.
type Token struct {
	Token     string
	ExpiresAt time.Time
	RefreshAt time.Time
}

// NewTokens returns an empty cache that requests tokens through client
// (nil: no API server; every Get fails).
func NewTokens(client ServiceAccountsGetter, clk clock.Clock, log *slog.Logger) *Tokens {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if log == nil {
		log = slog.Default()
	}
	return &Tokens{client: client, clock: clk, log: log, cache: map[tokenKey]cachedToken{}}
}

// Get returns a token of the pod's service account bound to the pod (a
// TokenRequest with boundObjectRef Pod name/uid) for audience ("" for
// none) and expirationSeconds (nil: the API server's default, one hour),
// from the cache or the TokenRequest API. Errors are kubelet's token
// manager's ("failed to fetch token: ...", "token ... expired and refresh
// failed: ...") wrapping the API error.
func (t *Tokens) Get(ctx context.Context, pod *v1.Pod, audience string, expirationSeconds *int64) (Token, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		return Token{}, errors.New("the pod has no serviceAccountName")
	}
	if t.client == nil {
		return Token{}, errors.New("no API server to request a token from")
	}
	key := tokenKey{namespace: pod.Namespace, serviceAccount: sa, audience: audience, pod: pod.UID, podName: pod.Name}
	spec := authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
	}
	if expirationSeconds != nil {
		key.expirationSeconds = *expirationSeconds
		spec.ExpirationSeconds = expirationSeconds
	}
	if audience != "" {
		spec.Audiences = []string{audience}
	}

	now := t.clock.Now()
	t.gc(now)
	if tok, ok := t.fresh(key, now); ok {
		return tok, nil
	}
	// One request at a time per key: the volumes of a pod are set up side
	// by side, and two of them asking for the same token get the same one.
	v, err, _ := t.flight.Do(key.String(), func() (any, error) {
		return t.request(ctx, pod, key, spec, expirationSeconds)
	})
	if err != nil {
		return Token{}, err
	}
	return v.(Token), nil
}

// fresh returns the cached token for key if it is not due for refresh at
// now.
func (t *Tokens) fresh(key tokenKey, now time.Time) (Token, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cached, ok := t.cache[key]
	if !ok || !now.Before(cached.refreshAt) {
		return Token{}, false
	}
	return Token{Token: cached.token, ExpiresAt: cached.expiresAt, RefreshAt: cached.refreshAt}, true
}

// request asks the API server for the token of key (unless a request that
// just ended cached it) and caches it, or keeps the cached one while it
// is valid when the request fails.
func (t *Tokens) request(ctx context.Context, pod *v1.Pod, key tokenKey, spec authenticationv1.TokenRequestSpec, expirationSeconds *int64) (Token, error) {
	now := t.clock.Now()
	if tok, ok := t.fresh(key, now); ok {
		return tok, nil
	}
	sa, audience := key.serviceAccount, key.audience
	t.mu.Lock()
	cached, ok := t.cache[key]
	t.mu.Unlock()

	tr, err := t.client(pod.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	if err == nil {
		err = checkTokenResponse(tr)
	}
	if err != nil {
		switch {
		case !ok:
			return Token{}, fmt.Errorf("failed to fetch token: %w", err)
		case !now.Before(cached.expiresAt):
			return Token{}, fmt.Errorf("token %s expired and refresh failed: %w", key, err)
		}
		retry := now.Add(tokenRetry)
		if retry.After(cached.expiresAt) {
			retry = cached.expiresAt
		}
		t.log.Warn("token refresh failed; keeping the current token", "pod", kubetypes.FullName(pod), "podUID", pod.UID,
			"audience", audience, "expires", cached.expiresAt, "err", err)
		cached.refreshAt = retry
		t.mu.Lock()
		t.cache[key] = cached
		t.mu.Unlock()
		return Token{Token: cached.token, ExpiresAt: cached.expiresAt, RefreshAt: retry}, nil
	}
	exp := tr.Status.ExpirationTimestamp.Time
	// The server may shorten it (--service-account-max-token-expiration)
	// and fills in its default when none was asked for.
	var lifetime time.Duration
	switch {
	case tr.Spec.ExpirationSeconds != nil:
		lifetime = time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	case expirationSeconds != nil:
		lifetime = time.Duration(*expirationSeconds) * time.Second
	default:
		lifetime = exp.Sub(now)
	}
	refreshAt := tokenRefreshAt(exp, lifetime)
	if !refreshAt.After(now) {
		refreshAt = now.Add(tokenRetry)
	}
	t.mu.Lock()
	t.cache[key] = cachedToken{token: tr.Status.Token, expiresAt: exp, refreshAt: refreshAt}
	t.mu.Unlock()
	t.log.Debug("service account token requested", "pod", kubetypes.FullName(pod), "podUID", pod.UID, "audience", audience,
		"serviceAccount", sa, "expires", exp, "refreshAt", refreshAt)
	return Token{Token: tr.Status.Token, ExpiresAt: exp, RefreshAt: refreshAt}, nil
}

// Forget drops the cached tokens of the pod with uid; call it when the pod
// is gone. (Tokens of forgotten pods are also dropped once they expire.)
func (t *Tokens) Forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.cache {
		if k.pod == uid {
			delete(t.cache, k)
		}
	}
}

// gc drops the cached tokens that have expired (those of pods gone
// without Forget), at most once a tokenGCPeriod.
func (t *Tokens) gc(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.Sub(t.lastGC) < tokenGCPeriod {
		return
	}
	t.lastGC = now
	for k, c := range t.cache {
		if !now.Before(c.expiresAt) {
			delete(t.cache, k)
		}
	}
}

func checkTokenResponse(tr *authenticationv1.TokenRequest) error {
	switch {
	case tr == nil || tr.Status.Token == "":
		return errors.New("the API server returned no token")
	case tr.Status.ExpirationTimestamp.IsZero():
		return errors.New("the API server returned a token without expiration time")
	}
	return nil
}

// tokenRefreshAt is when a token that expires at exp after a lifetime of
// lifetime must be refreshed: when 80% of its lifetime has passed or when
// it is tokenMaxAge old, whichever is first (kubelet's rule).
func tokenRefreshAt(exp time.Time, lifetime time.Duration) time.Time {
	issued := exp.Add(-lifetime)
	at := exp.Add(-lifetime / 5)
	if old := issued.Add(tokenMaxAge); old.Before(at) {
		at = old
	}
	return at
}
