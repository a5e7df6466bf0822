package pods

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/nodeagent/nodeagent/pods/objcache"
	"github.com/nodeagent/nodeagent/pods/volume"
)

// fakeClient is a Client over client-go's fake Clientset: its typed
// clients satisfy every field's interface.
func fakeClient(cs *fake.Clientset) *Client {
	return &Client{
		Pods:            func(ns string) PodClient { return cs.CoreV1().Pods(ns) },
		Secrets:         func(ns string) objcache.Namespaced[*v1.SecretList] { return cs.CoreV1().Secrets(ns) },
		ConfigMaps:      func(ns string) objcache.Namespaced[*v1.ConfigMapList] { return cs.CoreV1().ConfigMaps(ns) },
		ServiceAccounts: func(ns string) volume.ServiceAccountClient { return cs.CoreV1().ServiceAccounts(ns) },
		Services:        cs.CoreV1().Services(""),
		RuntimeClasses:  cs.NodeV1().RuntimeClasses(),
		Events:          &typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")},
		Scheme:          scheme.Scheme,
	}
}

// TestClientValidate: a nil Client is "no API server"; a Client missing
// clients names each of them.
func TestClientValidate(t *testing.T) {
	var none *Client
	if err := none.validate(); err != nil {
		t.Errorf("nil client: %v", err)
	}
	if err := fakeClient(fake.NewClientset()).validate(); err != nil {
		t.Errorf("complete client: %v", err)
	}
	c := fakeClient(fake.NewClientset())
	c.Services, c.Scheme = nil, nil
	err := c.validate()
	if err == nil || !strings.Contains(err.Error(), "Services, Scheme") {
		t.Errorf("missing clients: got %v, want both named", err)
	}
}
