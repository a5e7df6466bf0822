package kubeclient

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
)

// ServiceAccounts is the client of one namespace's ServiceAccounts, with
// the token subresource.
type ServiceAccounts struct {
	*gentype.ClientWithList[*corev1.ServiceAccount, *corev1.ServiceAccountList]
}

// CreateToken requests a token for service account name (TokenRequest), as
// client-go's typed client does.
func (c *ServiceAccounts) CreateToken(ctx context.Context, name string, tr *authenticationv1.TokenRequest, opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error) {
	result := &authenticationv1.TokenRequest{}
	err := c.GetClient().Post().
		UseProtobufAsDefault().
		Namespace(c.GetNamespace()).
		Resource("serviceaccounts").
		Name(name).
		SubResource("token").
		VersionedParams(&opts, ParameterCodec).
		Body(tr).
		Do(ctx).
		Into(result)
	if err != nil {
		return nil, err
	}
	return result, nil
}

// EventSink writes the events of a client-go event recorder
// (k8s.io/client-go/tools/record) to the namespace each event names, as
// client-go's EventSinkImpl does.
type EventSink struct {
	client rest.Interface
}

var _ record.EventSink = (*EventSink)(nil)

// Events is the event sink for record.EventBroadcaster.StartRecordingToSink.
func (c *Clientset) Events() *EventSink { return &EventSink{client: c.core} }

// Create creates e in its namespace.
func (s *EventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	if e.Namespace == "" {
		return nil, fmt.Errorf("event %q has no namespace", e.Name)
	}
	result := &corev1.Event{}
	err := s.client.Post().Namespace(e.Namespace).Resource("events").
		Body(e).Do(context.Background()).Into(result)
	return result, err
}

// Update replaces e (a series' count and last timestamp).
func (s *EventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	if e.Namespace == "" {
		return nil, fmt.Errorf("event %q has no namespace", e.Name)
	}
	result := &corev1.Event{}
	err := s.client.Put().Namespace(e.Namespace).Resource("events").Name(e.Name).
		Body(e).Do(context.Background()).Into(result)
	return result, err
}

// Patch applies the strategic merge patch data to e.
func (s *EventSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	if e.Namespace == "" {
		return nil, fmt.Errorf("event %q has no namespace", e.Name)
	}
	result := &corev1.Event{}
	err := s.client.Patch(types.StrategicMergePatchType).Namespace(e.Namespace).Resource("events").Name(e.Name).
		Body(data).Do(context.Background()).Into(result)
	return result, err
}
