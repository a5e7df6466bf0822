package fleetsim

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeagent/nodeagent/heartbeat"
	"github.com/nodeagent/nodeagent/internal/kubeclient"
	"github.com/nodeagent/nodeagent/internal/testing/localcluster"
	"github.com/nodeagent/nodeagent/nodestatus"
)

// Fleet holds what the simulated nodes of one process share: the cluster,
// the simulated host, the stand-in runtime's image list and the heartbeat
// metrics (one set for the process, as a Prometheus registry would hold
// them for one agent).
type Fleet struct {
	State     *localcluster.State
	Host      *nodestatus.Host
	RootDir   string // the simulated nodefs directory (Host.Statfs answers for it)
	Images    []nodestatus.Image
	Log       *slog.Logger
	HBMetrics *heartbeat.Metrics // may be nil
}

// Node is one simulated node's configuration.
type Node struct {
	Index           int
	Name            string
	ReportFrequency time.Duration // nodeStatusReportFrequency; 0 = the default (5m)
}

// Agent is a running simulated node.
type Agent struct {
	Name      string
	Status    *nodestatus.Manager
	Heartbeat *heartbeat.Controller

	cancel     context.CancelFunc
	done       sync.WaitGroup
	closeConns func()
}

// NodeIP is the simulated InternalIP of node i (10.64.0.0/10, distinct for
// four million nodes).
func NodeIP(i int) string {
	return fmt.Sprintf("10.%d.%d.%d", 64+(i>>16)&63, (i>>8)&255, i&255)
}

// RestConfig mints node credentials for name (system:node:<name> in
// system:nodes, as a kubelet has them) and returns its client config.
func (f *Fleet) RestConfig(name string) (*rest.Config, error) {
	path, err := f.State.NodeKubeconfig(name)
	if err != nil {
		return nil, fmt.Errorf("node %s credentials: %w", name, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("node %s kubeconfig: %w", name, err)
	}
	return cfg, nil
}

// Start starts node n as cmd/nodeagent wires an agent: a main client
// (kubelet's QPS 50, burst 100) for nodestatus, the heartbeat's own client
// and connection and the main client's connection rotation
// (heartbeat.NewClientConfigs), both the agent's own client
// (internal/kubeclient), the heartbeat running at once, and
// registration followed by the status loop. rec (may be nil) observes its
// Lease and status writes. base is the node's rest config (RestConfig).
func (f *Fleet) Start(ctx context.Context, n Node, base *rest.Config, rec *Recorder) (*Agent, error) {
	log := f.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	leaseDuration := heartbeat.DefaultLeaseDuration
	restCfg := rest.CopyConfig(base)
	restCfg.UserAgent = "nodeagent/fleetsim"
	// The agent's own wiring: the heartbeat's client and connection, and
	// the main client's connections closed when a renewal goes unanswered.
	hbCfg, onHeartbeatFailure, err := heartbeat.NewClientConfigs(restCfg, heartbeat.RenewInterval(leaseDuration))
	if err != nil {
		return nil, err
	}
	hbClient, err := kubeclient.NewForConfig(hbCfg)
	if err != nil {
		return nil, fmt.Errorf("node %s heartbeat client: %w", n.Name, err)
	}
	restCfg.QPS, restCfg.Burst = 50, 100
	if rec != nil {
		restCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return rec.WrapTransport(rt) }
	}
	client, err := kubeclient.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("node %s API client: %w", n.Name, err)
	}
	var leases heartbeat.LeaseClient = hbClient.Leases(heartbeat.Namespace)
	if rec != nil {
		leases = rec.Leases(n.Index, leases)
	}
	hb, err := heartbeat.New(heartbeat.Options{
		NodeName:          n.Name,
		Leases:            leases,
		Nodes:             hbClient.Nodes(),
		LeaseDuration:     leaseDuration,
		Logger:            log.With("component", "heartbeat"),
		Metrics:           f.HBMetrics,
		OnRepeatedFailure: onHeartbeatFailure,
	})
	if err != nil {
		return nil, err
	}
	images := f.Images
	ns, err := nodestatus.New(nodestatus.Options{
		NodeName:        n.Name,
		Nodes:           client.Nodes(),
		Logger:          log.With("component", "nodestatus"),
		ReportFrequency: n.ReportFrequency,
		NodeIP:          NodeIP(n.Index),
		RootDir:         f.RootDir,
		Host:            f.Host,
		AgentVersion:    "v0.1.0-fleetsim",
		KubeletPort:     10250,
		RuntimeVersion: func(context.Context) (string, string, error) {
			return "containerd", "1.7.24", nil
		},
		ListImages:     func(context.Context) ([]nodestatus.Image, error) { return images, nil },
		RuntimeHealthy: func() error { return nil },
		PLEGHealthy:    func() error { return nil },
	})
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithCancel(ctx)
	a := &Agent{Name: n.Name, Status: ns, Heartbeat: hb, cancel: cancel, closeConns: onHeartbeatFailure}
	if rec != nil {
		rec.Started(n.Index)
	}
	a.done.Add(2)
	go func() { defer a.done.Done(); hb.Run(actx) }()
	go func() {
		defer a.done.Done()
		if _, err := ns.Register(actx); err != nil {
			return // ctx done
		}
		hb.NodeRegistered()
		ns.Run(actx)
	}()
	return a, nil
}

// Stop stops the agent's loops and waits for them; its Node and Lease stay,
// as when an agent dies.
func (a *Agent) Stop() {
	a.cancel()
	a.done.Wait()
	a.closeConns()
}
