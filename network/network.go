package network

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containernetworking/cni/libcni"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/dirwatch"
	"github.com/nodeagent/nodeagent/internal/netns"
)

// Defaults.
const (
	DefaultConfDir = "/etc/cni/net.d"
	// DefaultResyncPeriod is how often the configuration directory is
	// rescanned while no configuration is usable (or it cannot be
	// watched), as kubelet's dockershim rescanned on each status check.
	DefaultResyncPeriod = 5 * time.Second
	// IfName is the pod's interface.
	IfName = "eth0"
)

// DefaultBinDirs are searched for plugins: the upstream location and
// Debian's containernetworking-plugins package.
func DefaultBinDirs() []string { return []string{"/opt/cni/bin", "/usr/lib/cni"} }

// Config configures a Network.
type Config struct {
	// ConfDir holds the network configurations. Default /etc/cni/net.d.
	ConfDir string
	// BinDirs are searched for plugin binaries, in order. Default
	// DefaultBinDirs().
	BinDirs []string
	// CacheDir keeps what DEL needs (libcni's cache: the configuration,
	// arguments and result of each ADD) and survives agent restarts:
	// <rootDir>/cni. Required.
	CacheDir string
	// PodCIDRs returns the node's spec.podCIDRs, handed to plugins with the
	// ipRanges capability (as containerd does). Optional.
	PodCIDRs func() []string
	// ResyncPeriod: see DefaultResyncPeriod.
	ResyncPeriod time.Duration
	Logger       *slog.Logger // default slog.Default()
	Clock        clock.Clock  // default the real clock
	// Registerer gets the nodeagent_network_* metrics; nil = none.
	Registerer prometheus.Registerer
}

// PodRef names a pod.
type PodRef struct {
	Namespace, Name string
	UID             types.UID
}

func (p PodRef) String() string { return p.Namespace + "/" + p.Name }

// PortMapping is a hostPort to forward to the pod (portMappings
// capability).
type PortMapping struct {
	HostPort, ContainerPort int32
	Protocol                string // TCP, UDP or SCTP; "" = TCP
	HostIP                  string // "" = every host address
}

// Bandwidth limits the pod's traffic (bandwidth capability), in bits per
// second; 0 means no limit.
type Bandwidth struct {
	IngressRate, EgressRate int64
}

// Options are a pod's network options.
type Options struct {
	PortMappings []PortMapping
	Bandwidth    *Bandwidth
	// IPs asks plugins with the ips capability for these addresses.
	IPs []net.IP
}

// Result is the outcome of SetUp.
type Result struct {
	// IPs are the pod's addresses on its interface, in the plugin's
	// order (see PodIPs for status.podIPs).
	IPs []net.IP
	// Network is the CNI network's name, File its configuration file
	// ("" when the result came from the cache).
	Network, File string
	// Cached says the pod was already attached: no plugin ran.
	Cached bool
}

// Network is a CNI runtime. Its zero value is not usable; call New.
type Network struct {
	cfg     Config
	cni     *libcni.CNIConfig
	log     *slog.Logger
	clock   clock.Clock
	metrics *metrics

	state    atomic.Pointer[loaded]
	reloadMu sync.Mutex

	podMu   sync.Mutex
	podLock map[types.UID]*podLock
}

type podLock struct {
	sync.Mutex
	users int
}

// New validates cfg. It reads nothing: call Reload or Run.
func New(cfg Config) (*Network, error) {
	if cfg.ConfDir == "" {
		cfg.ConfDir = DefaultConfDir
	}
	if len(cfg.BinDirs) == 0 {
		cfg.BinDirs = DefaultBinDirs()
	}
	var errs []error
	if !filepath.IsAbs(cfg.ConfDir) {
		errs = append(errs, fmt.Errorf("cniConfDir %q: must be an absolute path", cfg.ConfDir))
	}
	for _, d := range cfg.BinDirs {
		if !filepath.IsAbs(d) {
			errs = append(errs, fmt.Errorf("cniBinDir %q: must be an absolute path", d))
		}
	}
	if !filepath.IsAbs(cfg.CacheDir) {
		errs = append(errs, fmt.Errorf("cache directory %q: must be an absolute path", cfg.CacheDir))
	}
	if cfg.ResyncPeriod == 0 {
		cfg.ResyncPeriod = DefaultResyncPeriod
	} else if cfg.ResyncPeriod < 0 {
		errs = append(errs, fmt.Errorf("resync period %v: must be positive", cfg.ResyncPeriod))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	n := &Network{
		cfg:     cfg,
		cni:     libcni.NewCNIConfigWithCacheDir(cfg.BinDirs, cfg.CacheDir, nil),
		log:     cfg.Logger,
		clock:   cfg.Clock,
		podLock: map[types.UID]*podLock{},
		metrics: newMetrics(cfg.Registerer),
	}
	n.state.Store(&loaded{detail: "configuration not loaded yet"})
	return n, nil
}

// Status returns nil while a network configuration is usable, and a
// *NotReadyError (errors.Is ErrNotReady) otherwise. It does no I/O.
func (n *Network) Status() error {
	st := n.state.Load()
	if st.list == nil {
		return &NotReadyError{Detail: st.detail}
	}
	return nil
}

// Current returns the name and file of the network new pods join; "" when
// not ready.
func (n *Network) Current() (name, file string) {
	st := n.state.Load()
	if st.list == nil {
		return "", ""
	}
	return st.list.Name, st.file
}

// Reload scans the configuration directory now and reports the outcome as
// Status does.
func (n *Network) Reload(ctx context.Context) error {
	n.reloadMu.Lock()
	defer n.reloadMu.Unlock()
	st := loadConfig(ctx, n.cni, n.cfg.ConfDir)
	old := n.state.Swap(&st)
	if st.list != nil {
		n.metrics.ready.Set(1)
	} else {
		n.metrics.ready.Set(0)
	}
	switch {
	case st.list != nil && (old.list == nil || old.file != st.file || string(old.list.Bytes) != string(st.list.Bytes)):
		n.log.Info("CNI network configuration loaded", "network", st.list.Name, "file", st.file, "cniVersion", st.list.CNIVersion, "note", st.detail)
	case st.list == nil && (old.list != nil || old.detail != st.detail):
		n.log.Warn("no usable CNI network configuration; pods that need the network wait", "confDir", n.cfg.ConfDir, "reason", st.detail)
	}
	return n.Status()
}

// Run loads the configuration and reloads it whenever the configuration
// directory changes (internal/dirwatch: debounced, the directory may be
// missing, removed and made again), until ctx is done. While nothing is
// usable it also rescans every ResyncPeriod: plugins copied after their
// configuration change nothing in the directory.
func (n *Network) Run(ctx context.Context) {
	dw, err := dirwatch.New(dirwatch.Options{
		Dirs: func() []string { return []string{n.cfg.ConfDir} },
		Relevant: func(ev fsnotify.Event) bool {
			return slices.Contains(confExtensions, filepath.Ext(ev.Name))
		},
		Debounce: watchDebounce,
		Retry:    watchRetry,
		Clock:    n.clock,
		Logger:   n.log,
	})
	if err != nil { // only for invalid options
		n.log.Error("cannot watch the CNI configuration directory", "err", err)
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); dw.Run(ctx) }()
	defer func() { cancel(); <-done }()
	_ = n.Reload(ctx)
	for {
		var timer clock.Timer
		var tick <-chan time.Time
		if n.Status() != nil {
			timer = n.clock.NewTimer(n.cfg.ResyncPeriod)
			tick = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-dw.C():
		case <-tick:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
		_ = n.Reload(ctx)
	}
}

// Watching the configuration directory: a write and the rename into place
// come as one reload; a directory that cannot be watched is retried after
// 1s, doubling up to 30s (no jitter: one local process).
const watchDebounce = 100 * time.Millisecond

var watchRetry = wait.Backoff{Duration: time.Second, Factor: 2, Cap: 30 * time.Second, Steps: math.MaxInt32}

// lockPod serialises the calls for one pod.
func (n *Network) lockPod(uid types.UID) func() {
	n.podMu.Lock()
	l := n.podLock[uid]
	if l == nil {
		l = &podLock{}
		n.podLock[uid] = l
	}
	l.users++
	n.podMu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		n.podMu.Lock()
		if l.users--; l.users == 0 {
			delete(n.podLock, uid)
		}
		n.podMu.Unlock()
	}
}

func validatePod(pod PodRef, netnsPath string) error {
	var errs []error
	if pod.UID == "" {
		errs = append(errs, errors.New("pod UID is empty"))
	}
	if pod.Namespace == "" || pod.Name == "" {
		errs = append(errs, errors.New("pod namespace and name are required"))
	}
	if !filepath.IsAbs(netnsPath) {
		errs = append(errs, fmt.Errorf("network namespace path %q is not absolute", netnsPath))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	return nil
}

// SetUp attaches the pod's network namespace at netnsPath to the network
// (see the package documentation for idempotency and errors).
func (n *Network) SetUp(ctx context.Context, pod PodRef, netnsPath string, o Options) (Result, error) {
	if err := validatePod(pod, netnsPath); err != nil {
		return Result{}, fmt.Errorf("network: set up pod %s: %w", pod, err)
	}
	caps, err := capabilityArgs(o, n.podCIDRs())
	if err != nil {
		return Result{}, fmt.Errorf("network: set up pod %s: %w", pod, err)
	}
	unlock := n.lockPod(pod.UID)
	defer unlock()
	log := n.log.With("pod", pod.String(), "podUID", string(pod.UID))

	// Already attached here? Attached elsewhere (a namespace that was
	// replaced)? Left half-done by a crash?
	atts, err := n.cni.GetCachedAttachments(string(pod.UID))
	if err != nil {
		return Result{}, fmt.Errorf("network: set up pod %s: reading the CNI cache: %w", pod, err)
	}
	for _, a := range atts {
		if a.NetNS != netnsPath || a.IfName != IfName {
			continue
		}
		res, err := n.cachedResult(a)
		if err == nil {
			// The same path may hold a new namespace (the old one went
			// with a reboot): attached only if eth0 has the addresses.
			err = hasAddresses(netnsPath, IfName, res.IPs)
		}
		if err == nil {
			res.Cached = true
			return res, nil
		}
		log.Info("recorded CNI attachment is stale; attaching again", "network", a.Network, "reason", err)
	}
	if err := n.tearDown(ctx, pod, netnsPath, log); err != nil {
		return Result{}, fmt.Errorf("network: set up pod %s: removing the previous attachment: %w", pod, err)
	}

	st := n.state.Load()
	if st.list == nil {
		return Result{}, fmt.Errorf("network: set up pod %s: %w", pod, &NotReadyError{Detail: st.detail})
	}
	list := st.list
	rt := runtimeConf(pod, netnsPath, caps)
	// Recorded before ADD: a crash during ADD leaves what DEL needs.
	if err := n.writePending(pod.UID, pending{Config: list.Bytes, NetNS: netnsPath, Args: rt.Args, CapabilityArgs: rt.CapabilityArgs}); err != nil {
		return Result{}, fmt.Errorf("network: set up pod %s: %w", pod, err)
	}
	started := n.clock.Now()
	r, addErr := n.cni.AddNetworkList(ctx, list, rt)
	n.metrics.observe("add", started, n.clock.Now(), addErr)
	if addErr != nil {
		// Roll back what the plugins before the failing one did, even if
		// ctx is done (bounded).
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := n.cni.DelNetworkList(dctx, list, rt); err != nil {
			return Result{}, fmt.Errorf("network: set up pod %s in network %q: %w (rolling back: %v)", pod, list.Name, addErr, err)
		}
		n.removePending(pod.UID)
		return Result{}, fmt.Errorf("network: set up pod %s in network %q: %w", pod, list.Name, addErr)
	}
	n.removePending(pod.UID)
	res, err := resultFrom(r)
	if err != nil {
		return Result{}, fmt.Errorf("network: set up pod %s in network %q: %w", pod, list.Name, err)
	}
	res.Network, res.File = list.Name, st.file
	log.Info("pod network set up", "network", list.Name, "ips", res.IPs, "duration", n.clock.Since(started))
	return res, nil
}

// TearDown detaches the pod from every network it was attached to, with
// the configuration recorded at ADD (see the package documentation).
// netnsPath may already be gone.
func (n *Network) TearDown(ctx context.Context, pod PodRef, netnsPath string) error {
	if pod.UID == "" {
		return fmt.Errorf("network: tear down pod %s: %w: pod UID is empty", pod, ErrInvalidOptions)
	}
	unlock := n.lockPod(pod.UID)
	defer unlock()
	if err := n.tearDown(ctx, pod, netnsPath, n.log.With("pod", pod.String(), "podUID", string(pod.UID))); err != nil {
		return fmt.Errorf("network: tear down pod %s: %w", pod, err)
	}
	return nil
}

func (n *Network) tearDown(ctx context.Context, pod PodRef, netnsPath string, log *slog.Logger) error {
	atts, err := n.cni.GetCachedAttachments(string(pod.UID))
	if err != nil {
		return fmt.Errorf("reading the CNI cache: %w", err)
	}
	var errs []error
	for _, a := range atts {
		list, err := libcni.ConfListFromBytes(a.Config)
		if err != nil {
			errs = append(errs, fmt.Errorf("cached configuration of network %q: %w", a.Network, err))
			continue
		}
		rt := &libcni.RuntimeConf{
			ContainerID: a.ContainerID, NetNS: delNetNS(a.NetNS, netnsPath), IfName: a.IfName,
			Args: a.CniArgs, CapabilityArgs: a.CapabilityArgs,
		}
		start := n.clock.Now()
		err = n.cni.DelNetworkList(ctx, list, rt)
		n.metrics.observe("del", start, n.clock.Now(), err)
		if err != nil {
			errs = append(errs, fmt.Errorf("network %q: %w", a.Network, err))
			continue
		}
		log.Info("pod network torn down", "network", a.Network)
	}
	p, ok, err := n.readPending(pod.UID)
	if err != nil {
		errs = append(errs, err)
	} else if ok {
		list, err := libcni.ConfListFromBytes(p.Config)
		if err == nil {
			rt := &libcni.RuntimeConf{
				ContainerID: string(pod.UID), NetNS: delNetNS(p.NetNS, netnsPath), IfName: IfName,
				Args: p.Args, CapabilityArgs: p.CapabilityArgs,
			}
			err = n.cni.DelNetworkList(ctx, list, rt)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("interrupted attachment: %w", err))
		} else {
			n.removePending(pod.UID)
			log.Info("interrupted pod network attachment removed", "network", list.Name)
		}
	}
	return errors.Join(errs...)
}

// hasAddresses checks that the interface in the namespace at nsPath holds
// ips.
func hasAddresses(nsPath, ifName string, ips []net.IP) error {
	return netns.Do(nsPath, func() error {
		ifc, err := net.InterfaceByName(ifName)
		if err != nil {
			return fmt.Errorf("%s: %w", ifName, err)
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			return fmt.Errorf("%s: %w", ifName, err)
		}
		for _, ip := range ips {
			found := false
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok && ipn.IP.Equal(ip) {
					found = true
					break
				}
			}
			if !found {
				return fmt.Errorf("%s does not have %s", ifName, ip)
			}
		}
		return nil
	})
}

// delNetNS is the namespace DEL gets: the one recorded at ADD while it
// exists, else "" (the spec lets plugins clean up without one).
func delNetNS(recorded, given string) string {
	for _, p := range []string{recorded, given} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// Attached returns the UIDs of the pods with a recorded attachment (or an
// interrupted one): those TearDown still has work for. An agent that
// restarts tears down the ones it no longer runs.
func (n *Network) Attached() ([]types.UID, error) {
	atts, err := n.cni.GetCachedAttachments("")
	if err != nil {
		return nil, fmt.Errorf("network: reading the CNI cache: %w", err)
	}
	seen := map[types.UID]bool{}
	for _, a := range atts {
		seen[types.UID(a.ContainerID)] = true
	}
	es, err := os.ReadDir(filepath.Join(n.cfg.CacheDir, "pending"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("network: reading interrupted attachments: %w", err)
	}
	for _, e := range es {
		if uid, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			seen[types.UID(uid)] = true
		}
	}
	out := make([]types.UID, 0, len(seen))
	for uid := range seen {
		out = append(out, uid)
	}
	slices.Sort(out)
	return out, nil
}

// Check runs CHECK for an attached pod.
func (n *Network) Check(ctx context.Context, pod PodRef, netnsPath string) error {
	if err := validatePod(pod, netnsPath); err != nil {
		return fmt.Errorf("network: check pod %s: %w", pod, err)
	}
	unlock := n.lockPod(pod.UID)
	defer unlock()
	atts, err := n.cni.GetCachedAttachments(string(pod.UID))
	if err != nil {
		return fmt.Errorf("network: check pod %s: reading the CNI cache: %w", pod, err)
	}
	if len(atts) == 0 {
		return fmt.Errorf("network: check pod %s: not attached to any network", pod)
	}
	var errs []error
	for _, a := range atts {
		list, err := libcni.ConfListFromBytes(a.Config)
		if err != nil {
			errs = append(errs, fmt.Errorf("cached configuration of network %q: %w", a.Network, err))
			continue
		}
		rt := &libcni.RuntimeConf{ContainerID: a.ContainerID, NetNS: netnsPath, IfName: a.IfName, Args: a.CniArgs, CapabilityArgs: a.CapabilityArgs}
		start := n.clock.Now()
		err = n.cni.CheckNetworkList(ctx, list, rt)
		n.metrics.observe("check", start, n.clock.Now(), err)
		if err != nil {
			if errors.Is(err, libcni.ErrorCheckNotSupp) {
				err = fmt.Errorf("%w: %w", ErrCheckNotSupported, err)
			}
			errs = append(errs, fmt.Errorf("network %q: %w", a.Network, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("network: check pod %s: %w", pod, err)
	}
	return nil
}

func (n *Network) podCIDRs() []string {
	if n.cfg.PodCIDRs == nil {
		return nil
	}
	return n.cfg.PodCIDRs()
}

func (n *Network) cachedResult(a *libcni.NetworkAttachment) (Result, error) {
	list, err := libcni.ConfListFromBytes(a.Config)
	if err != nil {
		return Result{}, err
	}
	rt := &libcni.RuntimeConf{ContainerID: a.ContainerID, NetNS: a.NetNS, IfName: a.IfName}
	r, err := n.cni.GetNetworkListCachedResult(list, rt)
	if err != nil {
		return Result{}, err
	}
	if r == nil {
		return Result{}, errors.New("no cached result")
	}
	res, err := resultFrom(r)
	if err != nil {
		return Result{}, err
	}
	res.Network = list.Name
	return res, nil
}

// runtimeConf is the per-pod part of a plugin invocation: containerd's
// CNI_ARGS and the capability arguments.
func runtimeConf(pod PodRef, netnsPath string, caps map[string]any) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: string(pod.UID),
		NetNS:       netnsPath,
		IfName:      IfName,
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", pod.Namespace},
			{"K8S_POD_NAME", pod.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", string(pod.UID)},
			{"K8S_POD_UID", string(pod.UID)},
		},
		CapabilityArgs: caps,
	}
}

// resultFrom takes the addresses of the pod's interface from a result.
func resultFrom(r cnitypes.Result) (Result, error) {
	cr, err := current.NewResultFromResult(r)
	if err != nil {
		return Result{}, fmt.Errorf("CNI result: %w", err)
	}
	var res Result
	for _, ipc := range cr.IPs {
		// An address is the pod's when it names an interface in the
		// sandbox, or names none (older plugins).
		if ipc.Interface != nil {
			i := *ipc.Interface
			if i < 0 || i >= len(cr.Interfaces) || cr.Interfaces[i].Sandbox == "" {
				continue
			}
		}
		res.IPs = append(res.IPs, ipc.Address.IP)
	}
	if len(res.IPs) == 0 {
		return Result{}, errors.New("CNI result has no IP address for the pod")
	}
	return res, nil
}

// pending records an ADD in progress: the configuration and arguments DEL
// needs if the agent dies before ADD returns.
type pending struct {
	Config         []byte         `json:"config"`
	NetNS          string         `json:"netns"`
	Args           [][2]string    `json:"args"`
	CapabilityArgs map[string]any `json:"capabilityArgs,omitempty"`
}

func (n *Network) pendingPath(uid types.UID) string {
	return filepath.Join(n.cfg.CacheDir, "pending", string(uid)+".json")
}

func (n *Network) writePending(uid types.UID, p pending) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	path := n.pendingPath(uid)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("recording the attachment: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("recording the attachment: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("recording the attachment: %w", err)
	}
	return nil
}

func (n *Network) readPending(uid types.UID) (pending, bool, error) {
	b, err := os.ReadFile(n.pendingPath(uid))
	if errors.Is(err, os.ErrNotExist) {
		return pending{}, false, nil
	}
	if err != nil {
		return pending{}, false, fmt.Errorf("reading the interrupted attachment: %w", err)
	}
	var p pending
	if err := json.Unmarshal(b, &p); err != nil {
		// A torn record (crash while writing it, before ADD ran).
		n.removePending(uid)
		return pending{}, false, nil
	}
	return p, true, nil
}

func (n *Network) removePending(uid types.UID) {
	if err := os.Remove(n.pendingPath(uid)); err != nil && !errors.Is(err, os.ErrNotExist) {
		n.log.Warn("cannot remove the pending attachment record", "podUID", string(uid), "err", err)
	}
}
