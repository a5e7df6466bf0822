package nodestatus

import (
	"context"

	"github.com/nodeagent/nodeagent/internal/informer"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// NodeClient is what the manager uses of the API server: the Nodes
// resource. client-go's typed client (CoreV1().Nodes(), and its fake) and
// internal/kubeclient's Nodes() satisfy it.
type NodeClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Node, error)
	Create(ctx context.Context, node *v1.Node, opts metav1.CreateOptions) (*v1.Node, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.Node, error)
	List(ctx context.Context, opts metav1.ListOptions) (*v1.NodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// newNodeInformer follows the Node called name (a field selector on
// metadata.name, which the Node authorizer allows for the node's own
// object).
func newNodeInformer(c NodeClient, name string) cache.SharedIndexInformer {
	return informer.New[*v1.NodeList](c, fields.OneTermEqualSelector("metadata.name", name).String(), &v1.Node{})
}
