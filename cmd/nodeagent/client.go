package main

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/kubeclient"
	"github.com/nodeagent/nodeagent/nodeapi"
	"github.com/nodeagent/nodeagent/pods"
	"github.com/nodeagent/nodeagent/pods/objcache"
	"github.com/nodeagent/nodeagent/pods/volume"
)

// The agent talks to the API server through internal/kubeclient: typed
// clients for the resources it uses only, so the binary links and
// initialises six API groups rather than all of them (see deps_test.go).

// podsClient is the pod manager's view of the agent's client; nil
// without one.
func podsClient(c *kubeclient.Clientset) *pods.Client {
	if c == nil {
		return nil
	}
	return &pods.Client{
		Pods:            func(ns string) pods.PodClient { return c.Pods(ns) },
		Secrets:         func(ns string) objcache.Namespaced[*v1.SecretList] { return c.Secrets(ns) },
		ConfigMaps:      func(ns string) objcache.Namespaced[*v1.ConfigMapList] { return c.ConfigMaps(ns) },
		ServiceAccounts: func(ns string) volume.ServiceAccountClient { return c.ServiceAccounts(ns) },
		Services:        c.Services(""),
		RuntimeClasses:  c.RuntimeClasses(),
		Events:          c.Events(),
		Scheme:          kubeclient.Scheme,
	}
}

// nodeAPIClient is the node API's view of the agent's client; nil without
// one.
func nodeAPIClient(c *kubeclient.Clientset) *nodeapi.Client {
	if c == nil {
		return nil
	}
	return &nodeapi.Client{
		TokenReviews:               c.TokenReviews(),
		SubjectAccessReviews:       c.SubjectAccessReviews(),
		CertificateSigningRequests: c.CertificateSigningRequests(),
	}
}
