package nodeapi

import (
	"context"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	certv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Client is what the server uses of the API server, one typed client per
// resource: client-go's typed clients (and those of its fake Clientset)
// and internal/kubeclient's satisfy each field's interface. A field may be
// nil when the options never need it.
type Client struct {
	TokenReviews               TokenReviewCreator         // webhook authentication
	SubjectAccessReviews       SubjectAccessReviewCreator // webhook authorization
	CertificateSigningRequests CSRClient                  // serverTLSBootstrap
}

// TokenReviewCreator creates TokenReviews.
type TokenReviewCreator interface {
	Create(ctx context.Context, tr *authnv1.TokenReview, opts metav1.CreateOptions) (*authnv1.TokenReview, error)
}

// SubjectAccessReviewCreator creates SubjectAccessReviews.
type SubjectAccessReviewCreator interface {
	Create(ctx context.Context, sar *authzv1.SubjectAccessReview, opts metav1.CreateOptions) (*authzv1.SubjectAccessReview, error)
}

// CSRClient creates and reads CertificateSigningRequests.
type CSRClient interface {
	Create(ctx context.Context, csr *certv1.CertificateSigningRequest, opts metav1.CreateOptions) (*certv1.CertificateSigningRequest, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*certv1.CertificateSigningRequest, error)
}
