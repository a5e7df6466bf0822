package fleetsim

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/heartbeat"
)

// Recorder observes what the simulated nodes' own code does, from the
// outside: every Lease write the heartbeat makes (through a LeaseClient
// wrapper) and every Node status write nodestatus makes (through a
// RoundTripper wrapper). It never changes a request or an answer.
type Recorder struct {
	sched Schedule
	now   func() time.Time

	mu           sync.Mutex
	nodes        []nodeRecord
	latencies    []time.Duration // of every Lease write attempt, in order
	counts       Counts
	recoveryFrom time.Time
}

type nodeRecord struct {
	started    time.Time // when the agent started (for a node that never renews)
	last       time.Time // last successful renewal
	firstAfter time.Time // first renewal after recoveryFrom
}

// Counts are the recorder's running totals; subtract two snapshots for a window.
type Counts struct {
	Attempts, Succeeded, Failed int // Lease writes (Update or Create) and their outcome
	Tally                           // renewals that landed: late, missed, expired
	StatusWrites, StatusFailed  int
	StatusBytes                 int64 // request bodies of the status writes
	Latencies                   int   // index into the latency samples
}

// Sub returns c − o (MaxGap is c's).
func (c Counts) Sub(o Counts) Counts {
	return Counts{
		Attempts: c.Attempts - o.Attempts, Succeeded: c.Succeeded - o.Succeeded, Failed: c.Failed - o.Failed,
		Tally: Tally{Renewals: c.Renewals - o.Renewals, Late: c.Late - o.Late, Missed: c.Missed - o.Missed,
			Expired: c.Expired - o.Expired, MaxGap: c.MaxGap},
		StatusWrites: c.StatusWrites - o.StatusWrites, StatusFailed: c.StatusFailed - o.StatusFailed,
		StatusBytes: c.StatusBytes - o.StatusBytes, Latencies: c.Latencies - o.Latencies,
	}
}

// NewRecorder returns a Recorder for n nodes renewing on sched.
func NewRecorder(n int, sched Schedule) *Recorder {
	return &Recorder{sched: sched, now: time.Now, nodes: make([]nodeRecord, n)}
}

// Started notes that node i's agent started.
func (r *Recorder) Started(i int) {
	r.mu.Lock()
	r.nodes[i].started = r.now()
	r.mu.Unlock()
}

func (r *Recorder) leaseWrite(i int, start time.Time, err error) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts.Attempts++
	r.latencies = append(r.latencies, now.Sub(start))
	r.counts.Latencies = len(r.latencies)
	if err != nil {
		r.counts.Failed++
		return
	}
	r.counts.Succeeded++
	n := &r.nodes[i]
	r.counts.Tally.Observe(r.sched, n.last, now)
	n.last = now
	if !r.recoveryFrom.IsZero() && n.firstAfter.IsZero() {
		n.firstAfter = now
	}
}

func (r *Recorder) statusWrite(bytes int64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ok {
		r.counts.StatusWrites++
		r.counts.StatusBytes += bytes
	} else {
		r.counts.StatusFailed++
	}
}

// Snapshot returns the running totals.
func (r *Recorder) Snapshot() Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts
}

// Latencies returns the Lease write latencies between two snapshots.
func (r *Recorder) Latencies(from, to Counts) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.latencies[from.Latencies:to.Latencies]...)
}

// Close accounts every node's open gap up to end (see Tally.Close) and
// returns that part of the tally.
func (r *Recorder) Close(end time.Time) Tally {
	r.mu.Lock()
	defer r.mu.Unlock()
	var t Tally
	for _, n := range r.nodes {
		last := n.last
		if last.IsZero() {
			last = n.started
		}
		t.Close(r.sched, last, end)
	}
	return t
}

// MarkRecovery starts watching for every node's first renewal after now.
func (r *Recorder) MarkRecovery() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recoveryFrom = r.now()
	for i := range r.nodes {
		r.nodes[i].firstAfter = time.Time{}
	}
	return r.recoveryFrom
}

// FirstRenewals returns each node's first renewal since MarkRecovery (zero: none yet).
func (r *Recorder) FirstRenewals() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]time.Time, len(r.nodes))
	for i, n := range r.nodes {
		out[i] = n.firstAfter
	}
	return out
}

// Leases wraps node i's Lease client so that its writes are recorded.
func (r *Recorder) Leases(i int, c heartbeat.LeaseClient) heartbeat.LeaseClient {
	return &recordingLeases{LeaseClient: c, r: r, i: i}
}

type recordingLeases struct {
	heartbeat.LeaseClient
	r *Recorder
	i int
}

func (l *recordingLeases) Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	start := l.r.now()
	out, err := l.LeaseClient.Create(ctx, lease, opts)
	l.r.leaseWrite(l.i, start, err)
	return out, err
}

func (l *recordingLeases) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	start := l.r.now()
	out, err := l.LeaseClient.Update(ctx, lease, opts)
	l.r.leaseWrite(l.i, start, err)
	return out, err
}

func (l *recordingLeases) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*coordinationv1.Lease, error) {
	start := l.r.now()
	out, err := l.LeaseClient.Patch(ctx, name, pt, data, opts, sub...)
	l.r.leaseWrite(l.i, start, err)
	return out, err
}

// WrapTransport counts the Node status writes (PATCH or PUT of
// /api/v1/nodes/<name>/status) that go through rt; use it as a node's main
// client's rest.Config.WrapTransport.
func (r *Recorder) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	return &statusCounter{rt: rt, r: r}
}

type statusCounter struct {
	rt http.RoundTripper
	r  *Recorder
}

func (s *statusCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.rt.RoundTrip(req)
	if IsNodeStatusWrite(req.Method, req.URL.Path) {
		s.r.statusWrite(req.ContentLength, err == nil && resp.StatusCode < 300)
	}
	return resp, err
}

// IsNodeStatusWrite reports whether a request writes a Node's status.
func IsNodeStatusWrite(method, path string) bool {
	if method != http.MethodPatch && method != http.MethodPut {
		return false
	}
	rest, ok := strings.CutPrefix(path, "/api/v1/nodes/")
	if !ok {
		return false
	}
	name, sub, ok := strings.Cut(rest, "/")
	return ok && name != "" && sub == "status"
}
