// Command nodestatus measures what node heartbeats cost the control plane:
// etcd's own write counters and the apiserver's request counts per node-hour,
// for nodeagent's defaults against the legacy report-every-10s behaviour and
// the Lease-only floor, in one run on one local control plane.
//
//	go run ./hack/bench/nodestatus                 # full run: 10m per measured phase
//	go run ./hack/bench/nodestatus -smoke          # 1m per phase, for development
//	go run ./hack/bench/nodestatus -update-doc docs/benchmarks.md
//
// It uses the running local cluster ($NODEAGENT_CLUSTER_DIR, else
// _output/local, see hack/localcluster) or starts one in a temporary directory
// and stops it at the end. N in-process agents with distinct node names and
// node credentials each run a nodestatus.Manager and a heartbeat.Controller
// (the same code cmd/nodeagent wires), with a stand-in runtime reporting a
// fixed set of images.
//
// Phases run one after the other, each for its own window after a warm-up:
//
//	baseline   no agents: what the control plane writes by itself
//	lease      Lease renewals only (the floor)
//	default    Lease + NodeStatus with the defaults (compute 10s, report on change or 5m)
//	legacy     Lease + NodeStatus reported every 10s (nodeStatusReportFrequency: 10s)
//
// Every phase's etcd deltas have the baseline rate subtracted, then are
// divided by nodes × hours.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeagent/nodeagent/heartbeat"
	"github.com/nodeagent/nodeagent/internal/testing/fleetsim"
	"github.com/nodeagent/nodeagent/internal/testing/localcluster"
	"github.com/nodeagent/nodeagent/nodestatus"
)

type flags struct {
	clusterDir    string
	nodes         int
	duration      time.Duration
	floorDuration time.Duration
	warmup        time.Duration
	images        int
	updateDoc     string
	smoke         bool
	verbose       bool
}

func main() {
	var f flags
	def := os.Getenv("NODEAGENT_CLUSTER_DIR")
	if def == "" {
		def = filepath.Join("_output", "local")
	}
	flag.StringVar(&f.clusterDir, "cluster-dir", def, "directory of a running local cluster (started if not running)")
	flag.IntVar(&f.nodes, "nodes", 10, "in-process agents (distinct node names)")
	flag.DurationVar(&f.duration, "duration", 10*time.Minute, "measured window of the default and legacy phases")
	flag.DurationVar(&f.floorDuration, "floor-duration", 0, "measured window of the baseline and lease phases (default: -duration)")
	flag.DurationVar(&f.warmup, "warmup", 30*time.Second, "time before each window (registration, first reports)")
	flag.IntVar(&f.images, "images", 8, "images each agent's stand-in runtime reports")
	flag.StringVar(&f.updateDoc, "update-doc", "", "replace the generated block of this markdown file (docs/benchmarks.md) with the results")
	flag.BoolVar(&f.smoke, "smoke", false, "short run for development: 3 nodes, 1m windows, 15s warm-up")
	flag.BoolVar(&f.verbose, "v", false, "log the agents")
	flag.Parse()
	if f.smoke {
		f.nodes, f.duration, f.floorDuration, f.warmup = 3, time.Minute, time.Minute, 15*time.Second
	}
	if f.floorDuration == 0 {
		f.floorDuration = f.duration
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, f); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type bench struct {
	f       flags
	state   *localcluster.State
	admin   kubernetes.Interface
	adminRC *rest.Config
	names   []string
	clients []kubernetes.Interface
	log     *slog.Logger
}

func run(ctx context.Context, f flags) error {
	b := &bench{f: f, log: slog.New(slog.DiscardHandler)}
	if f.verbose {
		b.log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	stopCluster, err := b.cluster(ctx)
	if err != nil {
		return err
	}
	defer stopCluster()
	host, _ := os.Hostname()
	prefix := fmt.Sprintf("bench-%s-%d", sanitize(host), time.Now().Unix()%100000)
	for i := 0; i < f.nodes; i++ {
		name := fmt.Sprintf("%s-%02d", prefix, i)
		path, err := b.state.NodeKubeconfig(name)
		if err != nil {
			return err
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return err
		}
		cfg.QPS, cfg.Burst = 50, 100
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		b.names = append(b.names, name)
		b.clients = append(b.clients, c)
	}
	defer b.cleanup()

	phases := []phase{
		{name: "baseline", window: f.floorDuration},
		{name: "lease", window: f.floorDuration, lease: true},
		{name: "default", window: f.duration, lease: true, status: true, report: nodestatus.DefaultReportFrequency},
		{name: "legacy", window: f.duration, lease: true, status: true, report: 10 * time.Second},
	}
	total := time.Duration(0)
	for _, p := range phases {
		total += p.window + f.warmup
	}
	fmt.Fprintf(os.Stderr, "bench: %d nodes, phases %s; about %v in total\n", f.nodes, phaseNames(phases), total.Round(time.Minute))
	for i := range phases {
		if err := b.runPhase(ctx, &phases[i]); err != nil {
			return fmt.Errorf("phase %s: %w", phases[i].name, err)
		}
	}
	sizes, err := fleetsim.ObjectSizes(ctx, b.admin, b.names[0])
	if err != nil {
		return err
	}
	report := b.report(phases, sizes)
	fmt.Print(report)
	if f.updateDoc != "" {
		if err := updateDoc(f.updateDoc, report); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "bench: updated %s\n", f.updateDoc)
	}
	return nil
}

func phaseNames(ps []phase) string {
	var s []string
	for _, p := range ps {
		s = append(s, fmt.Sprintf("%s(%v)", p.name, p.window))
	}
	return strings.Join(s, ", ")
}

func sanitize(s string) string {
	s = strings.ToLower(s)
	s = regexp.MustCompile(`[^a-z0-9-]+`).ReplaceAllString(s, "-")
	if len(s) > 20 {
		s = s[:20]
	}
	return strings.Trim(s, "-")
}

// cluster loads the running cluster or starts one in a temporary directory.
func (b *bench) cluster(ctx context.Context) (func(), error) {
	noop := func() {}
	if s, err := localcluster.Load(b.f.clusterDir); err == nil {
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = s.Healthy(hctx)
		cancel()
		if err == nil {
			b.state = s
			fmt.Fprintf(os.Stderr, "bench: using the running cluster in %s\n", b.f.clusterDir)
			return noop, b.clientsFor()
		}
	}
	dir, err := os.MkdirTemp("", "na-bench-")
	if err != nil {
		return noop, err
	}
	bin, err := filepath.Abs(filepath.Join("_output", "bin"))
	if err != nil {
		return noop, err
	}
	fmt.Fprintf(os.Stderr, "bench: starting a local cluster in %s\n", dir)
	s, err := localcluster.Up(ctx, localcluster.Options{Dir: dir, BinDir: bin, NoContainerd: true, Log: os.Stderr})
	if err != nil {
		_ = localcluster.Down(dir)
		_ = os.RemoveAll(dir)
		return noop, fmt.Errorf("starting the local cluster (build it with hack/build-controlplane.sh): %w", err)
	}
	b.state = s
	return func() { _ = localcluster.Down(dir); _ = os.RemoveAll(dir) }, b.clientsFor()
}

func (b *bench) clientsFor() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", b.state.AdminKubeconfig)
	if err != nil {
		return err
	}
	b.adminRC = cfg
	b.admin, err = kubernetes.NewForConfig(cfg)
	return err
}

func (b *bench) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range b.names {
		_ = b.admin.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{})
		_ = b.admin.CoordinationV1().Leases("kube-node-lease").Delete(ctx, n, metav1.DeleteOptions{})
	}
}

type phase struct {
	name          string
	window        time.Duration
	lease, status bool
	report        time.Duration

	elapsed  time.Duration
	etcd     map[string]float64 // metric deltas
	requests map[string]float64 // "VERB resource[/sub]" deltas for nodes and leases
}

func (b *bench) runPhase(ctx context.Context, p *phase) error {
	fmt.Fprintf(os.Stderr, "bench: phase %s: warm-up %v, window %v\n", p.name, b.f.warmup, p.window)
	pctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	if p.lease || p.status {
		for i, name := range b.names {
			m, err := b.manager(name, b.clients[i], p.report)
			if err != nil {
				return err
			}
			if _, err := m.Register(pctx); err != nil {
				return err
			}
			if p.status {
				wg.Add(1)
				go func() { defer wg.Done(); m.Run(pctx) }()
			}
			if p.lease {
				hb, err := heartbeat.New(heartbeat.Options{
					NodeName: name,
					Leases:   b.clients[i].CoordinationV1().Leases("kube-node-lease"),
					Nodes:    b.clients[i].CoreV1().Nodes(),
					Logger:   b.log,
				})
				if err != nil {
					return err
				}
				wg.Add(1)
				go func() { defer wg.Done(); hb.Run(pctx) }()
			}
		}
	}
	if err := sleep(ctx, b.f.warmup); err != nil {
		return err
	}
	e0, r0, err := b.scrape(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := sleep(ctx, p.window); err != nil {
		return err
	}
	e1, r1, err := b.scrape(ctx)
	if err != nil {
		return err
	}
	p.elapsed = time.Since(start)
	p.etcd, p.requests = fleetsim.Delta(e0, e1), fleetsim.Delta(r0, r1)
	fmt.Fprintf(os.Stderr, "bench: phase %s: etcd %v\n", p.name, p.etcd)
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func (b *bench) manager(name string, c kubernetes.Interface, report time.Duration) (*nodestatus.Manager, error) {
	images := fleetsim.Images(b.f.images)
	dir, err := os.MkdirTemp("", "na-bench-root-")
	if err != nil {
		return nil, err
	}
	return nodestatus.New(nodestatus.Options{
		NodeName:        name,
		Nodes:           c.CoreV1().Nodes(),
		Logger:          b.log,
		ReportFrequency: report,
		RootDir:         dir,
		AgentVersion:    "v0.1.0-bench",
		RuntimeVersion: func(context.Context) (string, string, error) {
			return "containerd", "1.6.20", nil
		},
		ListImages:     func(context.Context) ([]nodestatus.Image, error) { return images, nil },
		RuntimeHealthy: func() error { return nil },
		PLEGHealthy:    func() error { return nil },
	})
}

// scrape reads etcd's counters and the apiserver's request counts for nodes and leases.
func (b *bench) scrape(ctx context.Context) (etcd, requests map[string]float64, err error) {
	if etcd, err = fleetsim.ScrapeEtcd(ctx, b.state.EtcdURL); err != nil {
		return nil, nil, err
	}
	requests, err = fleetsim.ScrapeRequests(ctx, b.admin)
	return etcd, requests, err
}

type rates struct{ puts, bytes float64 }

func (b *bench) report(phases []phase, sz fleetsim.Sizes) string {
	by := map[string]*phase{}
	for i := range phases {
		by[phases[i].name] = &phases[i]
	}
	base := by["baseline"]
	perHour := func(p *phase) rates {
		h := p.elapsed.Hours()
		bh := base.elapsed.Hours()
		puts := fleetsim.Metric(p.etcd, "etcd_debugging_mvcc_put_total", "etcd_mvcc_put_total")/h -
			fleetsim.Metric(base.etcd, "etcd_debugging_mvcc_put_total", "etcd_mvcc_put_total")/bh
		bytes := fleetsim.Metric(p.etcd, "etcd_debugging_mvcc_total_put_size_in_bytes", "etcd_mvcc_total_put_size_in_bytes")/h -
			fleetsim.Metric(base.etcd, "etcd_debugging_mvcc_total_put_size_in_bytes", "etcd_mvcc_total_put_size_in_bytes")/bh
		n := float64(b.f.nodes)
		return rates{puts / n, bytes / n}
	}
	lease, def, legacy := perHour(by["lease"]), perHour(by["default"]), perHour(by["legacy"])

	var w strings.Builder
	fmt.Fprintf(&w, "Generated by `go run ./hack/bench/nodestatus %s` on %s.\n\n", b.argsString(), time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&w, "Machine: %s.\n\n", machine(b))
	fmt.Fprintf(&w, "%d agents (distinct nodes, node credentials, %d images each); windows: baseline and lease %v, default and legacy %v, after %v warm-up each.\n",
		b.f.nodes, b.f.images, by["lease"].elapsed.Round(time.Second), by["default"].elapsed.Round(time.Second), b.f.warmup)
	fmt.Fprintf(&w, "Stored sizes (protobuf, managedFields included): Node %d B, Lease %d B.\n\n", sz.Node, sz.Lease)
	fmt.Fprintf(&w, "etcd writes per node-hour (baseline of %.0f puts/h, %.0f B/h from the control plane itself subtracted):\n\n",
		fleetsim.Metric(base.etcd, "etcd_debugging_mvcc_put_total", "etcd_mvcc_put_total")/base.elapsed.Hours(),
		fleetsim.Metric(base.etcd, "etcd_debugging_mvcc_total_put_size_in_bytes", "etcd_mvcc_total_put_size_in_bytes")/base.elapsed.Hours())
	fmt.Fprintf(&w, "| mode | puts / node-h | bytes / node-h | × Lease floor (bytes) | legacy ÷ mode (bytes) |\n|---|---:|---:|---:|---:|\n")
	row := func(name string, r rates) {
		fmt.Fprintf(&w, "| %s | %.0f | %.0f | %.2f | %.1f |\n", name, r.puts, r.bytes, fleetsim.Ratio(r.bytes, lease.bytes), fleetsim.Ratio(legacy.bytes, r.bytes))
	}
	row("Lease only (floor, measured)", lease)
	fmt.Fprintf(&w, "| Lease only (floor, computed: %d B × 360 renewals) | 360 | %d | %.2f | %.1f |\n", sz.Lease, sz.Lease*360,
		fleetsim.Ratio(float64(sz.Lease*360), lease.bytes), fleetsim.Ratio(legacy.bytes, float64(sz.Lease*360)))
	row("default (Lease + status on change or 5m)", def)
	row("legacy (Lease + status every 10s)", legacy)
	pre := rates{legacy.puts - lease.puts, legacy.bytes - lease.bytes}
	row("pre-KEP-589 (status every 10s, no Lease) = legacy − floor", pre)

	fmt.Fprintf(&w, "\napiserver requests per node-hour (nodes and leases; all clients, baseline subtracted):\n\n")
	keys := map[string]bool{}
	for _, p := range phases {
		for k := range p.requests {
			keys[k] = true
		}
	}
	var ks []string
	for k := range keys {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	fmt.Fprintf(&w, "| request | lease | default | legacy |\n|---|---:|---:|---:|\n")
	for _, k := range ks {
		vals := make([]float64, 0, 3)
		any := false
		for _, name := range []string{"lease", "default", "legacy"} {
			p := by[name]
			v := (p.requests[k]/p.elapsed.Hours() - base.requests[k]/base.elapsed.Hours()) / float64(b.f.nodes)
			if v >= 0.5 {
				any = true
			}
			vals = append(vals, v)
		}
		if any {
			fmt.Fprintf(&w, "| %s | %.0f | %.0f | %.0f |\n", k, vals[0], vals[1], vals[2])
		}
	}
	fmt.Fprintf(&w, "\nTargets: default writes ≥5× fewer bytes than legacy: %s (%.1f×); default within 1.3× of the Lease floor: %s (%.2f×).\n",
		yes(fleetsim.Ratio(legacy.bytes, def.bytes) >= 5), fleetsim.Ratio(legacy.bytes, def.bytes), yes(fleetsim.Ratio(def.bytes, lease.bytes) <= 1.3), fleetsim.Ratio(def.bytes, lease.bytes))
	return w.String()
}

func yes(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func (b *bench) argsString() string {
	return strings.Join(os.Args[1:], " ")
}

func machine(b *bench) string {
	cpu := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(l, "model name") {
				_, v, _ := strings.Cut(l, ":")
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if mi, err := (&nodestatus.Host{}).Meminfo(); err == nil {
		mem = fmt.Sprintf(", %.1f GiB RAM", float64(mi.Total)/(1<<30))
	}
	kernel, _ := (&nodestatus.Host{}).KernelVersion()
	ver := "?"
	if v, err := b.admin.Discovery().ServerVersion(); err == nil {
		ver = v.GitVersion
	}
	etcdVer := "?"
	if resp, err := http.Get(b.state.EtcdURL + "/version"); err == nil {
		var v struct {
			Server string `json:"etcdserver"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		etcdVer = v.Server
	}
	return fmt.Sprintf("%s × %d%s, Linux %s, %s; kube-apiserver %s, etcd %s", cpu, runtime.NumCPU(), mem, kernel, runtime.Version(), ver, etcdVer)
}

const (
	beginMarker = "<!-- nodestatus-bench:begin (generated by hack/bench/nodestatus -update-doc) -->"
	endMarker   = "<!-- nodestatus-bench:end -->"
)

// updateDoc replaces the text between the markers in path.
func updateDoc(path, report string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(data)
	i, j := strings.Index(s, beginMarker), strings.Index(s, endMarker)
	if i < 0 || j < i {
		return errors.New(path + ": markers of the generated block not found")
	}
	s = s[:i+len(beginMarker)] + "\n" + report + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}
