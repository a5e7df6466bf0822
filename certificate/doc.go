// Package certificate keeps the node's client and serving certificates, as
// kubelet's certificate manager (client-go util/certificate) does: TLS
// bootstrap from a bootstrap kubeconfig, and rotation before expiry.
//
// A Manager holds the current certificate behind Current, which is safe to
// call from any goroutine (TLS handshakes call it through
// GetClientCertificate / GetCertificate). Run, its only loop, requests a new
// certificate through the certificates API when there is none, when the
// current one is expired or no longer matches the template (another node
// name, new addresses), and at a jittered 70–90 % of its lifetime
// (RenewAt). Until a new certificate is issued the old one stays in use;
// a request that fails is retried with back-off and its reason is kept for
// Problem (the agent's /readyz shows it while there is no usable
// certificate).
//
// Certificates are stored as kubelet stores them (FileStore): under the
// certificate directory, <prefix>-<timestamp>.pem holds certificate and key,
// and <prefix>-current.pem is a symlink to the newest, so a kubeconfig
// naming kubelet-client-current.pem follows every rotation and survives a
// restart. LoadClientConfig decides, as kubelet's bootstrap package, whether
// the --kubeconfig file is still usable or must be replaced from the
// --bootstrap-kubeconfig.
//
// The package talks to the API server only through the small CSRClient
// interface (create and get CertificateSigningRequests), so it links none of
// client-go's Clientset: client-go's own util/certificate manager takes a
// kubernetes.Interface, which would link every API group into the agent
// (cmd/nodeagent/client_deps_test.go).
package certificate
