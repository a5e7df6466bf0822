// Package kubeclient is the agent's own Kubernetes API client: typed clients
// for the few resources the agent uses, over client-go's REST client, with
// a scheme (Scheme) that holds only their API groups.
//
// client-go's Clientset and its scheme package register and link every API
// group of Kubernetes; the agent uses seven. The typed clients here are
// client-go's generic ones (k8s.io/client-go/gentype), so their methods have
// the same signatures as client-go's typed clients: the packages that use
// them declare small interfaces that both satisfy, and their unit tests use
// client-go's fake Clientset. Requests prefer protobuf, as client-go's
// typed clients do, unless rest.Config.ContentType says otherwise.
//
// Only cmd/nodeagent (and the fleet simulator, which runs the agent's
// code) builds a Clientset; the other packages never import this one.
package kubeclient

import (
	"fmt"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Clientset holds one REST client per API group; its methods return typed
// clients for one resource. Safe for concurrent use.
type Clientset struct {
	core, coordination, node, certificates, authentication, authorization, storage rest.Interface
}

// NewForConfig returns a Clientset whose groups share one HTTP client and,
// as client-go's Clientset, one rate limiter (from c.QPS and c.Burst unless
// c.RateLimiter is set).
func NewForConfig(c *rest.Config) (*Clientset, error) {
	cfg := *c
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	httpClient, err := rest.HTTPClientFor(&cfg)
	if err != nil {
		return nil, err
	}
	return NewForConfigAndClient(&cfg, httpClient)
}

// NewForConfigAndClient is NewForConfig over an existing HTTP client.
func NewForConfigAndClient(c *rest.Config, httpClient *http.Client) (*Clientset, error) {
	cfg := *c
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		if cfg.Burst <= 0 {
			return nil, fmt.Errorf("burst must be greater than 0 when QPS is greater than 0 and no rate limiter is set")
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	var cs Clientset
	for _, g := range []struct {
		into *rest.Interface
		gv   schema.GroupVersion
	}{
		{&cs.core, corev1.SchemeGroupVersion},
		{&cs.coordination, coordinationv1.SchemeGroupVersion},
		{&cs.node, nodev1.SchemeGroupVersion},
		{&cs.certificates, certificatesv1.SchemeGroupVersion},
		{&cs.authentication, authenticationv1.SchemeGroupVersion},
		{&cs.authorization, authorizationv1.SchemeGroupVersion},
		{&cs.storage, storagev1.SchemeGroupVersion},
	} {
		rc, err := restClientFor(&cfg, g.gv, httpClient)
		if err != nil {
			return nil, fmt.Errorf("API client for %s: %w", g.gv, err)
		}
		*g.into = rc
	}
	return &cs, nil
}

// restClientFor is the REST client of one group version, configured as
// client-go's generated clients configure theirs, with this package's
// scheme. Its serializers are JSON and protobuf only: client-go's
// generated clients swap in a CBOR codec factory when the alpha
// ClientsAllowCBOR feature gate (KUBE_FEATURE_ClientsAllowCBOR) is on,
// which links the CBOR serializer into every binary (issue 16); the agent
// never speaks CBOR.
func restClientFor(c *rest.Config, gv schema.GroupVersion, httpClient *http.Client) (*rest.RESTClient, error) {
	cfg := *c
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	cfg.NegotiatedSerializer = Codecs.WithoutConversion()
	return rest.RESTClientForConfigAndClient(&cfg, httpClient)
}

// CoreRESTClient is the core/v1 REST client, for requests the typed
// clients do not make.
func (c *Clientset) CoreRESTClient() rest.Interface { return c.core }

// Nodes is the client of Nodes.
func (c *Clientset) Nodes() *gentype.ClientWithList[*corev1.Node, *corev1.NodeList] {
	return gentype.NewClientWithList("nodes", c.core, ParameterCodec, "",
		func() *corev1.Node { return &corev1.Node{} },
		func() *corev1.NodeList { return &corev1.NodeList{} },
		gentype.PrefersProtobuf[*corev1.Node]())
}

// Pods is the client of the Pods of namespace ("": all, for list and
// watch).
func (c *Clientset) Pods(namespace string) *gentype.ClientWithList[*corev1.Pod, *corev1.PodList] {
	return gentype.NewClientWithList("pods", c.core, ParameterCodec, namespace,
		func() *corev1.Pod { return &corev1.Pod{} },
		func() *corev1.PodList { return &corev1.PodList{} },
		gentype.PrefersProtobuf[*corev1.Pod]())
}

// Secrets is the client of the Secrets of namespace.
func (c *Clientset) Secrets(namespace string) *gentype.ClientWithList[*corev1.Secret, *corev1.SecretList] {
	return gentype.NewClientWithList("secrets", c.core, ParameterCodec, namespace,
		func() *corev1.Secret { return &corev1.Secret{} },
		func() *corev1.SecretList { return &corev1.SecretList{} },
		gentype.PrefersProtobuf[*corev1.Secret]())
}

// ConfigMaps is the client of the ConfigMaps of namespace.
func (c *Clientset) ConfigMaps(namespace string) *gentype.ClientWithList[*corev1.ConfigMap, *corev1.ConfigMapList] {
	return gentype.NewClientWithList("configmaps", c.core, ParameterCodec, namespace,
		func() *corev1.ConfigMap { return &corev1.ConfigMap{} },
		func() *corev1.ConfigMapList { return &corev1.ConfigMapList{} },
		gentype.PrefersProtobuf[*corev1.ConfigMap]())
}

// Services is the client of the Services of namespace ("": all).
func (c *Clientset) Services(namespace string) *gentype.ClientWithList[*corev1.Service, *corev1.ServiceList] {
	return gentype.NewClientWithList("services", c.core, ParameterCodec, namespace,
		func() *corev1.Service { return &corev1.Service{} },
		func() *corev1.ServiceList { return &corev1.ServiceList{} },
		gentype.PrefersProtobuf[*corev1.Service]())
}

// ServiceAccounts is the client of the ServiceAccounts of namespace.
func (c *Clientset) ServiceAccounts(namespace string) *ServiceAccounts {
	return &ServiceAccounts{gentype.NewClientWithList("serviceaccounts", c.core, ParameterCodec, namespace,
		func() *corev1.ServiceAccount { return &corev1.ServiceAccount{} },
		func() *corev1.ServiceAccountList { return &corev1.ServiceAccountList{} },
		gentype.PrefersProtobuf[*corev1.ServiceAccount]())}
}

// Leases is the client of the Leases of namespace.
func (c *Clientset) Leases(namespace string) *gentype.ClientWithList[*coordinationv1.Lease, *coordinationv1.LeaseList] {
	return gentype.NewClientWithList("leases", c.coordination, ParameterCodec, namespace,
		func() *coordinationv1.Lease { return &coordinationv1.Lease{} },
		func() *coordinationv1.LeaseList { return &coordinationv1.LeaseList{} },
		gentype.PrefersProtobuf[*coordinationv1.Lease]())
}

// RuntimeClasses is the client of RuntimeClasses.
func (c *Clientset) RuntimeClasses() *gentype.ClientWithList[*nodev1.RuntimeClass, *nodev1.RuntimeClassList] {
	return gentype.NewClientWithList("runtimeclasses", c.node, ParameterCodec, "",
		func() *nodev1.RuntimeClass { return &nodev1.RuntimeClass{} },
		func() *nodev1.RuntimeClassList { return &nodev1.RuntimeClassList{} },
		gentype.PrefersProtobuf[*nodev1.RuntimeClass]())
}

// CertificateSigningRequests is the client of CertificateSigningRequests.
func (c *Clientset) CertificateSigningRequests() *gentype.ClientWithList[*certificatesv1.CertificateSigningRequest, *certificatesv1.CertificateSigningRequestList] {
	return gentype.NewClientWithList("certificatesigningrequests", c.certificates, ParameterCodec, "",
		func() *certificatesv1.CertificateSigningRequest { return &certificatesv1.CertificateSigningRequest{} },
		func() *certificatesv1.CertificateSigningRequestList {
			return &certificatesv1.CertificateSigningRequestList{}
		},
		gentype.PrefersProtobuf[*certificatesv1.CertificateSigningRequest]())
}

// TokenReviews is the client of TokenReviews (create only).
func (c *Clientset) TokenReviews() *gentype.Client[*authenticationv1.TokenReview] {
	return gentype.NewClient("tokenreviews", c.authentication, ParameterCodec, "",
		func() *authenticationv1.TokenReview { return &authenticationv1.TokenReview{} },
		gentype.PrefersProtobuf[*authenticationv1.TokenReview]())
}

// SubjectAccessReviews is the client of SubjectAccessReviews (create only).
func (c *Clientset) SubjectAccessReviews() *gentype.Client[*authorizationv1.SubjectAccessReview] {
	return gentype.NewClient("subjectaccessreviews", c.authorization, ParameterCodec, "",
		func() *authorizationv1.SubjectAccessReview { return &authorizationv1.SubjectAccessReview{} },
		gentype.PrefersProtobuf[*authorizationv1.SubjectAccessReview]())
}

// PersistentVolumeClaims is the client of the PersistentVolumeClaims of
// namespace.
func (c *Clientset) PersistentVolumeClaims(namespace string) *gentype.ClientWithList[*corev1.PersistentVolumeClaim, *corev1.PersistentVolumeClaimList] {
	return gentype.NewClientWithList("persistentvolumeclaims", c.core, ParameterCodec, namespace,
		func() *corev1.PersistentVolumeClaim { return &corev1.PersistentVolumeClaim{} },
		func() *corev1.PersistentVolumeClaimList { return &corev1.PersistentVolumeClaimList{} },
		gentype.PrefersProtobuf[*corev1.PersistentVolumeClaim]())
}

// PersistentVolumes is the client of PersistentVolumes.
func (c *Clientset) PersistentVolumes() *gentype.ClientWithList[*corev1.PersistentVolume, *corev1.PersistentVolumeList] {
	return gentype.NewClientWithList("persistentvolumes", c.core, ParameterCodec, "",
		func() *corev1.PersistentVolume { return &corev1.PersistentVolume{} },
		func() *corev1.PersistentVolumeList { return &corev1.PersistentVolumeList{} },
		gentype.PrefersProtobuf[*corev1.PersistentVolume]())
}

// CSINodes is the client of CSINodes.
func (c *Clientset) CSINodes() *gentype.ClientWithList[*storagev1.CSINode, *storagev1.CSINodeList] {
	return gentype.NewClientWithList("csinodes", c.storage, ParameterCodec, "",
		func() *storagev1.CSINode { return &storagev1.CSINode{} },
		func() *storagev1.CSINodeList { return &storagev1.CSINodeList{} },
		gentype.PrefersProtobuf[*storagev1.CSINode]())
}

// CSIDrivers is the client of CSIDrivers.
func (c *Clientset) CSIDrivers() *gentype.ClientWithList[*storagev1.CSIDriver, *storagev1.CSIDriverList] {
	return gentype.NewClientWithList("csidrivers", c.storage, ParameterCodec, "",
		func() *storagev1.CSIDriver { return &storagev1.CSIDriver{} },
		func() *storagev1.CSIDriverList { return &storagev1.CSIDriverList{} },
		gentype.PrefersProtobuf[*storagev1.CSIDriver]())
}

// VolumeAttachments is the client of VolumeAttachments.
func (c *Clientset) VolumeAttachments() *gentype.ClientWithList[*storagev1.VolumeAttachment, *storagev1.VolumeAttachmentList] {
	return gentype.NewClientWithList("volumeattachments", c.storage, ParameterCodec, "",
		func() *storagev1.VolumeAttachment { return &storagev1.VolumeAttachment{} },
		func() *storagev1.VolumeAttachmentList { return &storagev1.VolumeAttachmentList{} },
		gentype.PrefersProtobuf[*storagev1.VolumeAttachment]())
}
