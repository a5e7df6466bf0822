package pods

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/record"

	"github.com/nodeagent/nodeagent/pods/mirror"
	"github.com/nodeagent/nodeagent/pods/objcache"
	"github.com/nodeagent/nodeagent/pods/source"
	"github.com/nodeagent/nodeagent/pods/status"
	"github.com/nodeagent/nodeagent/pods/volume"
)

// Client is what the Manager uses of the API server, one typed client per
// resource, with the node's credentials. client-go's typed clients (and
// those of its fake Clientset) and internal/kubeclient's satisfy each
// field's interface; cmd/nodeagent wires the latter. Every field is
// required.
type Client struct {
	// Pods returns the Pods client of a namespace ("": all namespaces,
	// for the API source's list and watch).
	Pods func(namespace string) PodClient
	// Secrets and ConfigMaps return the client of a namespace's objects
	// (watched by name for volumes and env).
	Secrets    func(namespace string) objcache.Namespaced[*v1.SecretList]
	ConfigMaps func(namespace string) objcache.Namespaced[*v1.ConfigMapList]
	// ServiceAccounts requests projected service account tokens.
	ServiceAccounts volume.ServiceAccountsGetter
	// Services lists and watches the Services of all namespaces (for the
	// service-link variables).
	Services ServiceListWatcher
	// RuntimeClasses reads the pods' RuntimeClasses.
	RuntimeClasses RuntimeClassGetter
	// Events records the pods' events; Scheme names the kinds of the
	// objects they are about.
	Events record.EventSink
	Scheme *runtime.Scheme
}

// PodClient is the union of what the status manager, the mirror client
// and the API source use of the Pods.
type PodClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Pod, error)
	List(ctx context.Context, opts metav1.ListOptions) (*v1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, pod *v1.Pod, opts metav1.CreateOptions) (*v1.Pod, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.Pod, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// ServiceListWatcher lists and watches Services.
type ServiceListWatcher interface {
	List(ctx context.Context, opts metav1.ListOptions) (*v1.ServiceList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// RuntimeClassGetter reads RuntimeClasses.
type RuntimeClassGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*nodev1.RuntimeClass, error)
}

// The sub-packages' views of the Pods client.
var (
	_ status.PodClient      = PodClient(nil)
	_ mirror.PodClient      = PodClient(nil)
	_ source.PodListWatcher = PodClient(nil)
)

// validate names the missing clients; a nil Client is valid (no API
// server).
func (c *Client) validate() error {
	if c == nil {
		return nil
	}
	var missing []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"Pods", c.Pods != nil}, {"Secrets", c.Secrets != nil}, {"ConfigMaps", c.ConfigMaps != nil},
		{"ServiceAccounts", c.ServiceAccounts != nil}, {"Services", c.Services != nil},
		{"RuntimeClasses", c.RuntimeClasses != nil}, {"Events", c.Events != nil}, {"Scheme", c.Scheme != nil},
	} {
		if !f.set {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("Client: missing %s", strings.Join(missing, ", "))
	}
	return nil
}

// statusPods is the status manager's view of the Pods; nil without a
// client.
func (c *Client) statusPods() status.PodsGetter {
	if c == nil {
		return nil
	}
	return func(ns string) status.PodClient { return c.Pods(ns) }
}

func (c *Client) mirrorPods() mirror.PodsGetter {
	return func(ns string) mirror.PodClient { return c.Pods(ns) }
}
