// Package faketoken answers TokenRequests (serviceaccounts/token) on a
// client-go fake clientset as the API server does, recording each
// request: the one fake behind the tests of the agent's service account
// token cache, its projected volumes and the CSI drivers' tokenRequests.
package faketoken

import (
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
)

// Server answers the n-th TokenRequest with Text(n) (n from 1;
// "token-<n>" when Text is nil), valid for the requested
// expirationSeconds from Clock's now — the API server's default, an
// hour, when unset, or the lifetime SetLifetime gave, as a server that
// shortens it.
type Server struct {
	Clock clock.PassiveClock
	Text  func(n int) string

	mu       sync.Mutex
	requests []*authenticationv1.TokenRequest
	saNames  []string
	fail     error
	lifetime int64
}

// Install makes s answer client's TokenRequests.
func (s *Server) Install(client *fake.Clientset) {
	client.PrependReactor("create", "serviceaccounts", s.react)
}

func (s *Server) react(a k8stesting.Action) (bool, runtime.Object, error) {
	ca := a.(k8stesting.CreateAction)
	if ca.GetSubresource() != "token" {
		return false, nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return true, nil, s.fail
	}
	req := ca.GetObject().(*authenticationv1.TokenRequest).DeepCopy()
	s.requests = append(s.requests, req.DeepCopy())
	s.saNames = append(s.saNames, a.(k8stesting.CreateActionImpl).Name)
	seconds := int64(3600)
	if req.Spec.ExpirationSeconds != nil {
		seconds = *req.Spec.ExpirationSeconds
	}
	if s.lifetime != 0 {
		seconds = s.lifetime
	}
	req.Spec.ExpirationSeconds = &seconds
	text := fmt.Sprintf("token-%d", len(s.requests))
	if s.Text != nil {
		text = s.Text(len(s.requests))
	}
	req.Status = authenticationv1.TokenRequestStatus{
		Token:               text,
		ExpirationTimestamp: metav1.NewTime(s.Clock.Now().Add(time.Duration(seconds) * time.Second)),
	}
	return true, req, nil
}

// Requests are the TokenRequests answered so far, as they were sent.
func (s *Server) Requests() []*authenticationv1.TokenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*authenticationv1.TokenRequest(nil), s.requests...)
}

// ServiceAccounts are the names of the service accounts each answered
// request was for.
func (s *Server) ServiceAccounts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.saNames...)
}

// Count is the number of requests answered.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// SetFail makes every later request fail with err (nil: answer again).
func (s *Server) SetFail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

// SetLifetime makes later tokens valid for seconds whatever was asked
// (0: as asked).
func (s *Server) SetLifetime(seconds int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lifetime = seconds
}
