package volume

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/testing/faketoken"
	"github.com/nodeagent/nodeagent/internal/testing/testlog"
)

func newTokensRig(t *testing.T) (*Tokens, *faketoken.Server, *testingclock.FakeClock) {
	clk := testingclock.NewFakeClock(projT0)
	client := fake.NewClientset()
	ts := &faketoken.Server{Clock: clk, Text: tokenText}
	ts.Install(client)
	sa := func(ns string) ServiceAccountClient { return client.CoreV1().ServiceAccounts(ns) }
	return NewTokens(sa, clk, testlog.New(t)), ts, clk
}

// A CSI driver's tokenRequest: the request kubelet makes (bound to the
// pod, the audience, expirationSeconds left to the API server when
// unset), one token per (audience, expirationSeconds) whoever asks, and
// the refresh at 80% of the lifetime the server granted.
func TestTokensKeyedAsKubelet(t *testing.T) {
	tokens, ts, clk := newTokensRig(t)
	ctx := context.Background()
	pod := apiPod()
	tok, err := tokens.Get(ctx, pod, "vault", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := authenticationv1.TokenRequestSpec{
		Audiences:      []string{"vault"},
		BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "uid-web"},
	}
	if d := cmp.Diff(want, ts.Requests()[0].Spec); d != "" {
		t.Errorf("TokenRequest (-want +got):\n%s", d)
	}
	if ts.ServiceAccounts()[0] != "default" {
		t.Errorf("service account %q", ts.ServiceAccounts()[0])
	}
	if tok.Token != tokenText(1) || !tok.ExpiresAt.Equal(projT0.Add(time.Hour)) || !tok.RefreshAt.Equal(projT0.Add(48*time.Minute)) {
		t.Errorf("token %.20q expires %v refresh %v; want token 1, an hour (the server's default), refresh at 48 min", tok.Token, tok.ExpiresAt, tok.RefreshAt)
	}
	// The same request again: the cached token.
	if again, err := tokens.Get(ctx, pod, "vault", nil); err != nil || again != tok {
		t.Errorf("second Get = %+v, %v; want the cached token", again, err)
	}
	// Another audience, another expiration, another pod: other tokens.
	if _, err := tokens.Get(ctx, pod, "", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Get(ctx, pod, "vault", utilptr.To[int64](600)); err != nil {
		t.Fatal(err)
	}
	other := apiPod()
	other.Name, other.UID = "other", "uid-other"
	if _, err := tokens.Get(ctx, other, "vault", nil); err != nil {
		t.Fatal(err)
	}
	if n := ts.Count(); n != 4 {
		t.Errorf("%d requests, want 4", n)
	}
	if ts.Requests()[1].Spec.Audiences != nil {
		t.Errorf("no audience asked for %v, want none", ts.Requests()[1].Spec.Audiences)
	}
	// Due for refresh: a new token.
	clk.SetTime(projT0.Add(48 * time.Minute))
	if tok, err := tokens.Get(ctx, pod, "vault", nil); err != nil || tok.Token != tokenText(5) {
		t.Errorf("Get at the refresh time = %.20q, %v; want token 5", tok.Token, err)
	}
	tokens.Forget(pod.UID)
	for k := range tokens.cache {
		if k.pod == pod.UID {
			t.Errorf("token %s kept after Forget", k)
		}
	}
}

// kubelet's token manager's errors: none cached, and cached but expired.
func TestTokensErrors(t *testing.T) {
	tokens, ts, clk := newTokensRig(t)
	ctx := context.Background()
	pod := apiPod()
	ts.SetFail(apierrors.NewForbidden(authenticationv1.Resource("serviceaccounts/token"), "default", errors.New(`audience "vault" not found in pod spec volume`)))
	_, err := tokens.Get(ctx, pod, "vault", nil)
	if want := `failed to fetch token: serviceaccounts/token.authentication.k8s.io "default" is forbidden: audience "vault" not found in pod spec volume`; err == nil || err.Error() != want {
		t.Errorf("Get = %v, want %s", err, want)
	}
	if !apierrors.IsForbidden(err) {
		t.Errorf("%v does not wrap the API error", err)
	}
	ts.SetFail(nil)
	if _, err := tokens.Get(ctx, pod, "vault", nil); err != nil {
		t.Fatal(err)
	}
	// Refresh fails while valid: the cached token, retried soon.
	ts.SetFail(apierrors.NewServiceUnavailable("etcd is sad"))
	clk.SetTime(projT0.Add(59*time.Minute + 40*time.Second))
	tok, err := tokens.Get(ctx, pod, "vault", nil)
	if err != nil || tok.Token != tokenText(1) || !tok.RefreshAt.Equal(clk.Now().Add(tokenRetry)) {
		t.Errorf("Get during a failing refresh = %.20q %v, %v", tok.Token, tok.RefreshAt, err)
	}
	// Cached and expired (less than the cache's collection period after
	// the last collection): kubelet's message.
	clk.SetTime(projT0.Add(time.Hour + 10*time.Second))
	_, err = tokens.Get(ctx, pod, "vault", nil)
	if want := `token "default"/"default"/[]string{"vault"}/0/v1.BoundObjectReference{Kind:"Pod", APIVersion:"v1", Name:"web", UID:"uid-web"}/"" expired and refresh failed: etcd is sad`; err == nil || err.Error() != want {
		t.Errorf("Get with an expired token = %v, want %s", err, want)
	}
	// Once collected: none cached.
	clk.SetTime(projT0.Add(time.Hour + 2*time.Minute))
	if _, err = tokens.Get(ctx, pod, "vault", nil); err == nil || err.Error() != "failed to fetch token: etcd is sad" {
		t.Errorf("Get after the collection = %v", err)
	}
	pod.Spec.ServiceAccountName = ""
	if _, err := tokens.Get(ctx, pod, "vault", nil); err == nil || !strings.Contains(err.Error(), "no serviceAccountName") {
		t.Errorf("Get without a service account = %v", err)
	}
	if _, err := NewTokens(nil, clk, nil).Get(ctx, apiPod(), "vault", nil); err == nil {
		t.Error("Get without an API server succeeded")
	}
}

// blockingTokens answers CreateToken with a new token each time, once
// release is closed, counting the requests.
type blockingTokens struct {
	mu       sync.Mutex
	requests int
	release  chan struct{}
}

func (b *blockingTokens) CreateToken(ctx context.Context, _ string, tr *authenticationv1.TokenRequest, _ metav1.CreateOptions) (*authenticationv1.TokenRequest, error) {
	b.mu.Lock()
	b.requests++
	n := b.requests
	b.mu.Unlock()
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	out := tr.DeepCopy()
	out.Status = authenticationv1.TokenRequestStatus{Token: tokenText(n), ExpirationTimestamp: metav1.NewTime(projT0.Add(time.Hour))}
	return out, nil
}

func (b *blockingTokens) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.requests
}

// Callers asking at once for the same token (a pod's volumes are set up
// side by side) share one request and get the same token.
func TestTokensOneRequestPerKeyAtATime(t *testing.T) {
	b := &blockingTokens{release: make(chan struct{})}
	tokens := NewTokens(func(string) ServiceAccountClient { return b }, testingclock.NewFakeClock(projT0), testlog.New(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const callers = 5
	got := make(chan Token, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			tok, err := tokens.Get(ctx, apiPod(), "vault", nil)
			if err != nil {
				t.Error(err)
			}
			got <- tok
		})
	}
	// Every caller has had the time to reach CreateToken before the
	// first answer.
	for b.count() == 0 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	close(b.release)
	wg.Wait()
	close(got)
	if n := b.count(); n != 1 {
		t.Errorf("%d TokenRequests for one key asked for at once, want 1", n)
	}
	for tok := range got {
		if tok.Token != tokenText(1) {
			t.Errorf("token %.20q, want the one request's", tok.Token)
		}
	}
}
