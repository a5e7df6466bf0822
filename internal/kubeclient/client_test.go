package kubeclient

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// request is what the fake API server saw of one request.
type request struct {
	method, path, query, accept, contentType string
	body                                     []byte
}

// fakeServer answers every request with reply(path), encoded in the first
// media type the request accepts (protobuf or JSON), and records the
// requests.
type fakeServer struct {
	t     *testing.T
	reply func(method, path string) runtime.Object
	mu    sync.Mutex
	seen  []request
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.seen = append(f.seen, request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Accept"), r.Header.Get("Content-Type"), body})
	f.mu.Unlock()
	obj := f.reply(r.Method, r.URL.Path)
	mediaType := "application/json"
	if strings.HasPrefix(r.Header.Get("Accept"), "application/vnd.kubernetes.protobuf") {
		mediaType = "application/vnd.kubernetes.protobuf"
	}
	info, ok := runtime.SerializerInfoForMediaType(Codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		f.t.Errorf("no serializer for %s", mediaType)
		return
	}
	gvks, _, err := Scheme.ObjectKinds(obj)
	if err != nil {
		f.t.Errorf("reply %T: %v", obj, err)
		return
	}
	w.Header().Set("Content-Type", mediaType)
	if err := Codecs.EncoderForVersion(info.Serializer, gvks[0].GroupVersion()).Encode(obj, w); err != nil {
		f.t.Errorf("encode %T: %v", obj, err)
	}
}

func (f *fakeServer) last() request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[len(f.seen)-1]
}

func newFake(t *testing.T, reply func(method, path string) runtime.Object) (*fakeServer, *Clientset) {
	f := &fakeServer{t: t, reply: reply}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cs, err := NewForConfig(&rest.Config{Host: srv.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return f, cs
}

// TestTypedClients: each typed client reaches its resource's path in its
// group, asks for protobuf as client-go's typed clients do, and decodes
// the protobuf answer with this package's scheme.
func TestTypedClients(t *testing.T) {
	ctx := context.Background()
	meta := metav1.ObjectMeta{Name: "x", Namespace: "ns"}
	for _, tc := range []struct {
		desc     string
		reply    runtime.Object
		call     func(*Clientset) (metav1.Object, error)
		wantPath string
	}{
		{"node get", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "x"}},
			func(c *Clientset) (metav1.Object, error) { return c.Nodes().Get(ctx, "x", metav1.GetOptions{}) },
			"/api/v1/nodes/x"},
		{"node status patch", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "x"}},
			func(c *Clientset) (metav1.Object, error) {
				return c.Nodes().Patch(ctx, "x", types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status")
			},
			"/api/v1/nodes/x/status"},
		{"pod get", &corev1.Pod{ObjectMeta: meta},
			func(c *Clientset) (metav1.Object, error) { return c.Pods("ns").Get(ctx, "x", metav1.GetOptions{}) },
			"/api/v1/namespaces/ns/pods/x"},
		{"pod create", &corev1.Pod{ObjectMeta: meta},
			func(c *Clientset) (metav1.Object, error) {
				return c.Pods("ns").Create(ctx, &corev1.Pod{ObjectMeta: meta}, metav1.CreateOptions{})
			},
			"/api/v1/namespaces/ns/pods"},
		{"secret list", &corev1.SecretList{Items: []corev1.Secret{{ObjectMeta: meta}}},
			func(c *Clientset) (metav1.Object, error) {
				l, err := c.Secrets("ns").List(ctx, metav1.ListOptions{})
				if err != nil || len(l.Items) != 1 {
					return nil, fmt.Errorf("list %v: %w", l, err)
				}
				return &l.Items[0], nil
			},
			"/api/v1/namespaces/ns/secrets"},
		{"configmap get", &corev1.ConfigMap{ObjectMeta: meta},
			func(c *Clientset) (metav1.Object, error) {
				return c.ConfigMaps("ns").Get(ctx, "x", metav1.GetOptions{})
			},
			"/api/v1/namespaces/ns/configmaps/x"},
		{"services list", &corev1.ServiceList{Items: []corev1.Service{{ObjectMeta: meta}}},
			func(c *Clientset) (metav1.Object, error) {
				l, err := c.Services("").List(ctx, metav1.ListOptions{})
				if err != nil || len(l.Items) != 1 {
					return nil, fmt.Errorf("list %v: %w", l, err)
				}
				return &l.Items[0], nil
			},
			"/api/v1/services"},
		{"service account token", &authenticationv1.TokenRequest{ObjectMeta: meta, Status: authenticationv1.TokenRequestStatus{Token: "t"}},
			func(c *Clientset) (metav1.Object, error) {
				tr, err := c.ServiceAccounts("ns").CreateToken(ctx, "sa", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
				if err == nil && tr.Status.Token != "t" {
					t.Errorf("token %q", tr.Status.Token)
				}
				return tr, err
			},
			"/api/v1/namespaces/ns/serviceaccounts/sa/token"},
		{"lease update", &coordinationv1.Lease{ObjectMeta: meta},
			func(c *Clientset) (metav1.Object, error) {
				return c.Leases("ns").Update(ctx, &coordinationv1.Lease{ObjectMeta: meta}, metav1.UpdateOptions{})
			},
			"/apis/coordination.k8s.io/v1/namespaces/ns/leases/x"},
		{"runtime class", &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Handler: "runc"},
			func(c *Clientset) (metav1.Object, error) {
				return c.RuntimeClasses().Get(ctx, "x", metav1.GetOptions{})
			},
			"/apis/node.k8s.io/v1/runtimeclasses/x"},
		{"csr create", &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "x"}},
			func(c *Clientset) (metav1.Object, error) {
				return c.CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{}, metav1.CreateOptions{})
			},
			"/apis/certificates.k8s.io/v1/certificatesigningrequests"},
		{"token review", &authenticationv1.TokenReview{ObjectMeta: metav1.ObjectMeta{Name: "x"}},
			func(c *Clientset) (metav1.Object, error) {
				return c.TokenReviews().Create(ctx, &authenticationv1.TokenReview{}, metav1.CreateOptions{})
			},
			"/apis/authentication.k8s.io/v1/tokenreviews"},
		{"subject access review", &authorizationv1.SubjectAccessReview{ObjectMeta: metav1.ObjectMeta{Name: "x"}},
			func(c *Clientset) (metav1.Object, error) {
				return c.SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{}, metav1.CreateOptions{})
			},
			"/apis/authorization.k8s.io/v1/subjectaccessreviews"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f, cs := newFake(t, func(string, string) runtime.Object { return tc.reply })
			got, err := tc.call(cs)
			if err != nil {
				t.Fatal(err)
			}
			if got.GetName() != "x" {
				t.Errorf("decoded name %q, want x", got.GetName())
			}
			r := f.last()
			if r.path != tc.wantPath {
				t.Errorf("path %s, want %s", r.path, tc.wantPath)
			}
			if !strings.HasPrefix(r.accept, "application/vnd.kubernetes.protobuf") {
				t.Errorf("Accept %q, want protobuf first", r.accept)
			}
			if len(r.body) > 0 && r.method != http.MethodPatch && r.contentType != "application/vnd.kubernetes.protobuf" {
				t.Errorf("request body in %q, want protobuf", r.contentType)
			}
		})
	}
}

// TestJSONWhenConfigured: a ContentType in the config wins over the
// protobuf default, as with client-go's typed clients.
func TestJSONWhenConfigured(t *testing.T) {
	f := &fakeServer{t: t, reply: func(string, string) runtime.Object { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "x"}} }}
	srv := httptest.NewServer(f)
	defer srv.Close()
	cs, err := NewForConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Nodes().Get(context.Background(), "x", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := f.last(); !strings.HasPrefix(r.accept, "application/json") {
		t.Errorf("Accept %q, want JSON", r.accept)
	}
}

// TestEventSink: events go to the namespace they name, as client-go's
// EventSinkImpl sends them; one without a namespace is refused.
func TestEventSink(t *testing.T) {
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e1", Namespace: "default"}, Reason: "Started"}
	f, cs := newFake(t, func(string, string) runtime.Object { return ev })
	sink := cs.Events()
	for _, tc := range []struct {
		desc       string
		call       func() (*corev1.Event, error)
		wantMethod string
		wantPath   string
	}{
		{"create", func() (*corev1.Event, error) { return sink.Create(ev) }, http.MethodPost, "/api/v1/namespaces/default/events"},
		{"update", func() (*corev1.Event, error) { return sink.Update(ev) }, http.MethodPut, "/api/v1/namespaces/default/events/e1"},
		{"patch", func() (*corev1.Event, error) { return sink.Patch(ev, []byte(`{"count":2}`)) }, http.MethodPatch, "/api/v1/namespaces/default/events/e1"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := tc.call()
			if err != nil {
				t.Fatal(err)
			}
			if got.Reason != "Started" {
				t.Errorf("decoded %+v", got)
			}
			if r := f.last(); r.method != tc.wantMethod || r.path != tc.wantPath {
				t.Errorf("%s %s, want %s %s", r.method, r.path, tc.wantMethod, tc.wantPath)
			}
		})
	}
	if _, err := sink.Create(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e2"}}); err == nil {
		t.Error("event without namespace: want an error")
	}
}

// TestSchemeHoldsOnlyTheAgentsGroups: the scheme knows the agent's kinds
// and nothing else (an apps/v1 Deployment is not registered).
func TestSchemeHoldsOnlyTheAgentsGroups(t *testing.T) {
	for _, obj := range []runtime.Object{&corev1.Pod{}, &corev1.Node{}, &corev1.Event{}, &coordinationv1.Lease{},
		&nodev1.RuntimeClass{}, &certificatesv1.CertificateSigningRequest{}, &authenticationv1.TokenReview{},
		&authorizationv1.SubjectAccessReview{}, &metav1.Status{}} {
		if _, _, err := Scheme.ObjectKinds(obj); err != nil {
			t.Errorf("%T: %v", obj, err)
		}
	}
	if _, _, err := Scheme.ObjectKinds(&appsv1.Deployment{}); err == nil {
		t.Error("apps/v1 Deployment is registered")
	}
	var groups []string
	for _, gv := range Scheme.PrioritizedVersionsAllGroups() {
		groups = append(groups, gv.String())
	}
	want := []schema.GroupVersion{corev1.SchemeGroupVersion, coordinationv1.SchemeGroupVersion, nodev1.SchemeGroupVersion,
		certificatesv1.SchemeGroupVersion, authenticationv1.SchemeGroupVersion, authorizationv1.SchemeGroupVersion,
		storagev1.SchemeGroupVersion}
	if len(groups) != len(want) {
		t.Errorf("groups %v, want the %d of %v", groups, len(want), want)
	}
}
