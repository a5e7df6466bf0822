package main

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/nodeagent/nodeagent/config"
	"github.com/nodeagent/nodeagent/internal/kubeclient"
	"github.com/nodeagent/nodeagent/nodeapi"
	"github.com/nodeagent/nodeagent/pods"
	"github.com/nodeagent/nodeagent/pods/objcache"
	"github.com/nodeagent/nodeagent/pods/volume"
)

// The agent talks to the API server through internal/kubeclient: typed
// clients for the resources it uses only, so the binary links and
// initialises six API groups rather than all of them (see deps_test.go).

// kubeClients are the agent's API clients, as kubelet's (its KubeClient,
// EventClient and HeartbeatClient). All present the same credentials: with
// a managed client certificate, main, events and status are built from one
// configuration, so they share its transport (or its tracked dialer) and
// follow a rotation together (certs.go); heartbeat follows it through its
// own transport.
type kubeClients struct {
	// main is rate-limited by kubeAPIQPS and kubeAPIBurst: pods, their
	// status, their volumes' objects, node registration, reviews.
	main *kubeclient.Clientset
	// events writes Events, rate-limited by eventRecordQPS and eventBurst
	// on its own limiter, so that a burst of pod events waits here rather
	// than in front of main's requests (kubelet's EventClient).
	events *kubeclient.Clientset
	// status reports the node status (its Get, Patch and the Node's
	// informer) without a rate limiter, on main's connections: kubelet
	// reports it through its heartbeat client, which kubeAPIQPS does not
	// cover.
	status *kubeclient.Clientset
	// heartbeat renews the Lease on a connection of its own, without a
	// rate limiter (heartbeat.NewClientConfig).
	heartbeat *kubeclient.Clientset
}

// newKubeClients builds the agent's clients from c's configurations, with
// cfg's rates (main and hb already carry its contentType, set by
// newAPIClients). A QPS of 0 is passed on as kubelet passes it: client-go
// then applies its default, 5 per second.
func newKubeClients(cfg *config.NodeAgentConfiguration, c *apiClients, userAgent string) (*kubeClients, error) {
	mainCfg := rest.CopyConfig(c.main)
	mainCfg.UserAgent = userAgent
	mainCfg.QPS, mainCfg.Burst = float32(cfg.KubeAPIQPS), int(cfg.KubeAPIBurst)
	eventsCfg := rest.CopyConfig(mainCfg)
	eventsCfg.QPS, eventsCfg.Burst = float32(cfg.EventRecordQPS), int(cfg.EventBurst)
	statusCfg := rest.CopyConfig(mainCfg)
	statusCfg.QPS, statusCfg.Burst, statusCfg.RateLimiter = -1, 0, flowcontrol.NewFakeAlwaysRateLimiter()
	var out kubeClients
	for _, b := range []struct {
		into *(*kubeclient.Clientset)
		cfg  *rest.Config
		what string
	}{
		{&out.main, mainCfg, "API client"},
		{&out.events, eventsCfg, "Events API client"},
		{&out.status, statusCfg, "node status API client"},
		{&out.heartbeat, c.hb, "heartbeat API client"},
	} {
		cs, err := kubeclient.NewForConfig(b.cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.what, err)
		}
		*b.into = cs
	}
	return &out, nil
}

// setContentType makes c's requests use contentType, as kubelet's
// setContentTypeForClient: with protobuf, answers in protobuf or JSON are
// accepted. "" leaves client-go's choice.
func setContentType(c *rest.Config, contentType string) {
	if c == nil || contentType == "" {
		return
	}
	c.ContentType = contentType
	if contentType == runtime.ContentTypeProtobuf {
		c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	}
}

// podsClient is the pod manager's view of the agent's clients (Events
// through events); nil without one.
func podsClient(c, events *kubeclient.Clientset) *pods.Client {
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
		Events:          events.Events(),
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
