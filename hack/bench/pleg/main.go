// Command pleg benchmarks the PLEG: event-driven (containerd + cgroup
// sources, 5m safety-net relist) against relist-only (kubelet's 1s
// baseline), in the same run, on a private containerd.
//
//	go run ./hack/bench/pleg [-exits 200] [-idle 5m] [-counts 100,300] [-json FILE]
//
// It starts a private containerd and two agent processes (this binary with
// the "agent" argument: runtime adapter + PLEG + the /events endpoint the
// agent mounts, driven in-process because the agent binary is not wired
// yet). Both watch the same containers, so they see the same exits.
//
//   - Detection latency: a container's init process is SIGKILLed by this
//     program, which takes the time just before kill(2) and the time it
//     reads the matching ContainerDied line from each agent's /events
//     stream (JSON lines, as `nodeagent events` prints them).
//   - Idle cost: CPU time (utime+stime from /proc/<pid>/stat) of each agent
//     process over the idle window, with N idle running containers.
//   - Relist duration: PLEG.Relist called in-process at the largest count.
//
// Needs root, containerd, runc and busybox-static.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"math/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/runtime"
	"k8s.io/apimachinery/pkg/types"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		os.Exit(agent(os.Args[2:]))
	}
	os.Exit(bench(os.Args[1:]))
}

// agent runs a runtime + PLEG and serves /events until killed.
func agent(args []string) int {
	fs := flag.NewFlagSet("agent", flag.ExitOnError)
	mode := fs.String("mode", "event", "event or relist")
	address := fs.String("address", "", "containerd socket")
	listen := fs.String("listen", "127.0.0.1:0", "address of the /events server")
	cgroupParent := fs.String("cgroup-parent", runtime.DefaultCgroupParent, "pods' cgroup parent")
	_ = fs.Parse(args)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rt, err := runtime.New(runtime.Options{Address: *address, Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opts := pleg.Options{Logger: log, CgroupParents: []string{*cgroupParent}}
	if *mode == "event" {
		opts.Sources = []pleg.Source{pleg.SourceContainerd, pleg.SourceCgroups}
	}
	p, err := pleg.New(rt, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go p.Run(ctx)
	go func() { // the pod workers' channel must be drained
		for range p.Watch() {
		}
	}()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mux := http.NewServeMux()
	mux.Handle("/events", pleg.EventsHandler(p))
	srv := &http.Server{Handler: mux}
	go func() { <-ctx.Done(); srv.Close() }()
	fmt.Printf("listening %s\n", ln.Addr())
	_ = srv.Serve(ln)
	return 0
}

type agentProc struct {
	mode string
	cmd  *exec.Cmd
	addr string

	mu      sync.Mutex
	seen    map[string]time.Time // type/containerID -> when read
	events  map[string]pleg.Event
	waiters map[string]chan time.Time
}

func startAgent(mode, address, cgroupParent string) (*agentProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "agent", "-mode", mode, "-address", address, "-cgroup-parent", cgroupParent)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", mode, err)
	}
	a := &agentProc{mode: mode, cmd: cmd, addr: strings.TrimSpace(strings.TrimPrefix(line, "listening ")),
		seen: map[string]time.Time{}, events: map[string]pleg.Event{}, waiters: map[string]chan time.Time{}}
	resp, err := http.Get("http://" + a.addr + "/events")
	if err != nil {
		return nil, err
	}
	go a.read(resp)
	return a, nil
}

func (a *agentProc) read(resp *http.Response) {
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadBytes('\n')
		now := time.Now()
		if err != nil {
			return
		}
		var ev pleg.Event
		if json.Unmarshal(line, &ev) != nil {
			continue
		}
		key := string(ev.Type) + "/" + ev.ContainerID
		a.mu.Lock()
		if _, ok := a.seen[key]; !ok {
			a.seen[key] = now
			a.events[key] = ev
			if w := a.waiters[key]; w != nil {
				w <- now
				delete(a.waiters, key)
			}
		}
		a.mu.Unlock()
	}
}

// wait returns when the agent reported the event (read time), or false.
func (a *agentProc) wait(t pleg.EventType, id string, timeout time.Duration) (time.Time, bool) {
	key := string(t) + "/" + id
	a.mu.Lock()
	if at, ok := a.seen[key]; ok {
		a.mu.Unlock()
		return at, true
	}
	ch := make(chan time.Time, 1)
	a.waiters[key] = ch
	a.mu.Unlock()
	select {
	case at := <-ch:
		return at, true
	case <-time.After(timeout):
		return time.Time{}, false
	}
}

// cpu returns the process's user+system CPU time.
func cpu(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

type result struct {
	Exits        int                           `json:"exits"`
	Latency      map[string]map[string]float64 `json:"latencyMs"`   // mode -> stat, kill -> line read
	Detection    map[string]map[string]float64 `json:"detectionMs"` // kill -> the event's own time
	Sources      map[string]map[string]int     `json:"sources"`     // mode -> detecting source -> count
	Missed       map[string]int                `json:"missed"`
	Idle         []idleResult                  `json:"idle"`
	RelistMs     map[string]float64            `json:"relistMsAt"`
	RelistCount  int                           `json:"relistContainers"`
	Containerd   string                        `json:"containerd"`
	IdleDuration string                        `json:"idleDuration"`
}

type idleResult struct {
	Containers    int     `json:"containers"`
	EventCPU      float64 `json:"eventCPUSeconds"`
	RelistCPU     float64 `json:"relistCPUSeconds"`
	ContainerdCPU float64 `json:"containerdCPUSeconds"`
	Seconds       float64 `json:"seconds"`
}

func bench(args []string) int {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	exits := fs.Int("exits", 200, "container exits to time")
	idle := fs.Duration("idle", 5*time.Minute, "idle measurement window per container count (0: skip the idle phase)")
	countsFlag := fs.String("counts", "100,300", "idle container counts (ascending)")
	jsonOut := fs.String("json", "", "also write the results as JSON to this file")
	_ = fs.Parse(args)
	var counts []int
	for _, c := range strings.Split(*countsFlag, ",") {
		n, err := strconv.Atoi(c)
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bad -counts %q\n", *countsFlag)
			return 2
		}
		counts = append(counts, n)
	}
	if err := run(*exits, *idle, counts, *jsonOut); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	return 0
}

func run(exits int, idle time.Duration, counts []int, jsonOut string) error {
	ctx := context.Background()
	cd, err := testimage.NewContainerd()
	if err != nil {
		return err
	}
	defer cd.Close()
	if err := cd.Start(); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rt, err := runtime.New(runtime.Options{Address: cd.Address, CgroupParent: cd.CgroupParent, Logger: log, CallTimeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer rt.Close()
	if err := testimage.Import(ctx, rt); err != nil {
		return err
	}
	v, _ := rt.Version(ctx)
	res := result{Exits: exits, Latency: map[string]map[string]float64{}, Detection: map[string]map[string]float64{}, Sources: map[string]map[string]int{}, Missed: map[string]int{}, RelistMs: map[string]float64{},
		Containerd: v.RuntimeVersion, IdleDuration: idle.String()}

	agents := map[string]*agentProc{}
	for _, mode := range []string{"event", "relist"} {
		a, err := startAgent(mode, cd.Address, cd.CgroupParent)
		if err != nil {
			return err
		}
		defer func() { _ = a.cmd.Process.Kill() }()
		agents[mode] = a
	}
	time.Sleep(2 * time.Second) // both agents relisted and subscribed

	seq := 0
	create := func(pod string) (string, error) {
		seq++
		id, err := rt.CreateContainer(ctx, runtime.ContainerSpec{
			Pod:     runtime.PodRef{UID: types.UID(pod), Name: pod, Namespace: "bench"},
			Name:    "c",
			Image:   testimage.Ref,
			Command: []string{"sleep", "1000000"},
		})
		if err != nil {
			return "", err
		}
		return id, rt.StartContainer(ctx, id)
	}
	waitStarted := func(ids []string) error {
		for _, id := range ids {
			for mode, a := range agents {
				if _, ok := a.wait(pleg.ContainerStarted, id, 60*time.Second); !ok {
					return fmt.Errorf("agent %s never reported %s started", mode, id)
				}
			}
		}
		return nil
	}

	// Detection latency.
	fmt.Fprintf(os.Stderr, "latency: %d exits\n", exits)
	lat := map[string][]time.Duration{}
	detect := map[string][]time.Duration{} // kill -> the PLEG's event time
	const batch = 20
	for done := 0; done < exits; {
		n := min(batch, exits-done)
		var ids []string
		for i := 0; i < n; i++ {
			id, err := create(fmt.Sprintf("lat-%d", seq))
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		if err := waitStarted(ids); err != nil {
			return err
		}
		killed := map[string]time.Time{}
		for _, id := range ids {
			c, err := rt.InspectContainer(ctx, id)
			if err != nil {
				return err
			}
			// Spacing with jitter so that kills do not phase-lock with
			// the 1s relist.
			time.Sleep(100*time.Millisecond + time.Duration(rand.Int63n(int64(37*time.Millisecond))))
			t0 := time.Now()
			if err := syscall.Kill(int(c.Pid), syscall.SIGKILL); err != nil {
				return fmt.Errorf("kill %s: %w", id, err)
			}
			killed[id] = t0
		}
		for _, id := range ids {
			for mode, a := range agents {
				at, ok := a.wait(pleg.ContainerDied, id, 10*time.Second)
				if !ok {
					res.Missed[mode]++
					continue
				}
				lat[mode] = append(lat[mode], at.Sub(killed[id]))
				a.mu.Lock()
				ev := a.events[string(pleg.ContainerDied)+"/"+id]
				a.mu.Unlock()
				detect[mode] = append(detect[mode], ev.Time.Sub(killed[id]))
				if res.Sources[mode] == nil {
					res.Sources[mode] = map[string]int{}
				}
				res.Sources[mode][string(ev.Source)]++
			}
		}
		for _, id := range ids {
			if err := rt.RemoveContainer(ctx, id); err != nil {
				return err
			}
		}
		done += n
		fmt.Fprintf(os.Stderr, "  %d/%d\n", done, exits)
	}
	for mode, ds := range lat {
		res.Latency[mode] = stats(ds)
		res.Detection[mode] = stats(detect[mode])
	}

	// Idle cost.
	var running []string
	for _, n := range counts {
		if idle <= 0 {
			break
		}
		fmt.Fprintf(os.Stderr, "idle: starting containers up to %d\n", n)
		var added []string
		for len(running) < n {
			id, err := create(fmt.Sprintf("idle-%d", len(running)))
			if err != nil {
				return err
			}
			running = append(running, id)
			added = append(added, id)
		}
		if err := waitStarted(added); err != nil {
			return err
		}
		time.Sleep(10 * time.Second) // settle
		fmt.Fprintf(os.Stderr, "idle: measuring %s with %d containers\n", idle, n)
		e0, r0, c0 := cpu(agents["event"].cmd.Process.Pid), cpu(agents["relist"].cmd.Process.Pid), cpu(cd.Pid())
		start := time.Now()
		time.Sleep(idle)
		secs := time.Since(start).Seconds()
		e1, r1, c1 := cpu(agents["event"].cmd.Process.Pid), cpu(agents["relist"].cmd.Process.Pid), cpu(cd.Pid())
		res.Idle = append(res.Idle, idleResult{Containers: n, EventCPU: (e1 - e0).Seconds(), RelistCPU: (r1 - r0).Seconds(),
			ContainerdCPU: (c1 - c0).Seconds(), Seconds: secs})
	}

	// Relist duration at the largest count, in-process, with the agents
	// stopped so that they do not load containerd meanwhile.
	for _, a := range agents {
		_ = a.cmd.Process.Signal(syscall.SIGTERM)
		_ = a.cmd.Wait()
	}
	time.Sleep(2 * time.Second)
	p, err := pleg.New(rt, pleg.Options{Logger: log})
	if err != nil {
		return err
	}
	var rl []time.Duration
	for i := 0; i < 51; i++ {
		t0 := time.Now()
		if err := p.Relist(ctx); err != nil {
			return err
		}
		if i > 0 { // the first one also emits the initial events
			rl = append(rl, time.Since(t0))
		}
	}
	res.RelistMs = stats(rl)
	res.RelistCount = len(running)

	report(os.Stdout, res)
	if jsonOut != "" {
		data, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(jsonOut, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func stats(ds []time.Duration) map[string]float64 {
	if len(ds) == 0 {
		return nil
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	q := func(p float64) float64 {
		i := int(p*float64(len(ds))+0.999999) - 1
		return ms(ds[max(0, min(i, len(ds)-1))])
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return map[string]float64{"n": float64(len(ds)), "min": ms(ds[0]), "p50": q(0.5), "p90": q(0.9), "p99": q(0.99),
		"max": ms(ds[len(ds)-1]), "mean": ms(sum / time.Duration(len(ds)))}
}

func report(w *os.File, r result) {
	fmt.Fprintf(w, "containerd %s\n\n", r.Containerd)
	fmt.Fprintf(w, "Detection latency, process SIGKILL -> ContainerDied read from /events (%d exits)\n\n", r.Exits)
	fmt.Fprintln(w, "| mode | n | missed | p50 ms | p90 ms | p99 ms | max ms | detected by | p50/p99 ms to the PLEG's event time |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, m := range []string{"event", "relist"} {
		s, d := r.Latency[m], r.Detection[m]
		fmt.Fprintf(w, "| %s | %.0f | %d | %.1f | %.1f | %.1f | %.1f | %v | %.1f / %.1f |\n", m, s["n"], r.Missed[m], s["p50"], s["p90"], s["p99"], s["max"], r.Sources[m], d["p50"], d["p99"])
	}
	fmt.Fprintf(w, "\nIdle agent CPU over %s\n\n", r.IdleDuration)
	fmt.Fprintln(w, "| containers | event-driven CPU s | relist-only CPU s | ratio | containerd CPU s (both agents) |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- |")
	for _, i := range r.Idle {
		ratio := 0.0
		if i.RelistCPU > 0 {
			ratio = i.EventCPU / i.RelistCPU
		}
		fmt.Fprintf(w, "| %d | %.2f | %.2f | %.3f | %.2f |\n", i.Containers, i.EventCPU, i.RelistCPU, ratio, i.ContainerdCPU)
	}
	s := r.RelistMs
	fmt.Fprintf(w, "\nRelist duration at %d containers (%.0f relists): p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
		r.RelistCount, s["n"], s["p50"], s["p99"], s["max"])
}
