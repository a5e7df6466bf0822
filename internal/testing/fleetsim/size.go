package fleetsim

import (
	"bytes"
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
)

// Sizes are a Node's and its Lease's sizes as the API server stores them
// in etcd (protobuf with the "k8s\0" prefix, managedFields included).
type Sizes struct{ Node, Lease int }

// ObjectSizes encodes Node name and its Lease as the API server stores them.
func ObjectSizes(ctx context.Context, admin kubernetes.Interface, name string) (Sizes, error) {
	n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Sizes{}, err
	}
	l, err := admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Sizes{}, err
	}
	enc := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	size := func(obj k8sruntime.Object) (int, error) {
		var buf bytes.Buffer
		codec := scheme.Codecs.EncoderForVersion(enc, obj.GetObjectKind().GroupVersionKind().GroupVersion())
		if err := codec.Encode(obj, &buf); err != nil {
			return 0, err
		}
		return buf.Len(), nil
	}
	n.APIVersion, n.Kind = "v1", "Node"
	l.APIVersion, l.Kind = "coordination.k8s.io/v1", "Lease"
	ns, err := size(n)
	if err != nil {
		return Sizes{}, err
	}
	ls, err := size(l)
	if err != nil {
		return Sizes{}, err
	}
	return Sizes{Node: ns, Lease: ls}, nil
}
