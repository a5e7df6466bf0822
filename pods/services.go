package pods

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nodeagent/nodeagent/internal/informer"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// errServicesNotRead is kubelet's error while its Service informer has
// not listed the Services once.
var errServicesNotRead = errors.New("services have not yet been read at least once, cannot construct envvars")

// serviceSyncWait bounds how long a container start waits for the first
// list of Services before it fails with kubelet's error (and is retried).
const serviceSyncWait = 5 * time.Second

// serviceInformer is the Services informer for the service-link
// variables, started on first use (a node that runs only static pods, or
// none, never lists Services). It keeps only what the variables need of
// each Service (name, namespace, cluster IP, ports), so a cluster with
// many Services costs little memory.
type serviceInformer struct {
	client ServiceListWatcher

	mu      sync.Mutex
	ctx     context.Context // the Manager's run context; nil before Run
	lister  corelisters.ServiceLister
	synced  cache.InformerSynced
	started bool
}

func newServiceInformer(c ServiceListWatcher) *serviceInformer {
	return &serviceInformer{client: c}
}

// run sets the context the informer runs in once started.
func (s *serviceInformer) run(ctx context.Context) {
	s.mu.Lock()
	s.ctx = ctx
	s.mu.Unlock()
}

// start starts the informer once; false before run.
func (s *serviceInformer) start() (corelisters.ServiceLister, cache.InformerSynced, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return s.lister, s.synced, true
	}
	if s.ctx == nil {
		return nil, nil, false
	}
	inf := informer.New[*v1.ServiceList](s.client, "", &v1.Service{})
	_ = inf.SetTransform(trimService) // fails only once running
	s.lister, s.synced = corelisters.NewServiceLister(inf.GetIndexer()), inf.HasSynced
	go inf.Run(s.ctx.Done())
	s.started = true
	return s.lister, s.synced, true
}

// List returns every Service; with wait it waits (bounded by ctx and
// serviceSyncWait) for the first list.
func (s *serviceInformer) List(ctx context.Context, wait bool) ([]*v1.Service, error) {
	lister, synced, ok := s.start()
	if !ok {
		return nil, errServicesNotRead
	}
	if !synced() {
		if !wait {
			return nil, errServicesNotRead
		}
		wctx, cancel := context.WithTimeout(ctx, serviceSyncWait)
		defer cancel()
		if !cache.WaitForCacheSync(wctx.Done(), synced) {
			return nil, errServicesNotRead
		}
	}
	return lister.List(labels.Everything())
}

// trimService keeps what the service-link variables read.
func trimService(obj any) (any, error) {
	s, ok := obj.(*v1.Service)
	if !ok {
		return obj, nil
	}
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, ResourceVersion: s.ResourceVersion, UID: s.UID},
		Spec:       v1.ServiceSpec{ClusterIP: s.Spec.ClusterIP, ClusterIPs: s.Spec.ClusterIPs, Ports: s.Spec.Ports, Type: s.Spec.Type},
	}, nil
}
