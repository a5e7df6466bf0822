package kubeclient

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// Scheme holds the API groups the agent uses and nothing else: the types
// its clients decode, and the kinds its event recorder names.
var Scheme = runtime.NewScheme()

// Codecs are the serializers (JSON, YAML, protobuf) for Scheme's types.
var Codecs = serializer.NewCodecFactory(Scheme)

// ParameterCodec encodes options (ListOptions, ...) as query parameters.
var ParameterCodec = runtime.NewParameterCodec(Scheme)

// groups are the API group versions the agent talks to.
var groups = []func(*runtime.Scheme) error{
	corev1.AddToScheme,
	coordinationv1.AddToScheme,
	nodev1.AddToScheme,
	certificatesv1.AddToScheme,
	authenticationv1.AddToScheme,
	authorizationv1.AddToScheme,
	storagev1.AddToScheme,
}

func init() {
	// The unversioned meta types (Status, WatchEvent, ...) as client-go's
	// scheme registers them.
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	for _, add := range groups {
		utilruntime.Must(add(Scheme))
	}
}
