package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/internal/testing/fleetsim"
)

// The pressure phase (issue 16): with -memory-limit the agents run under a
// memory limit from their start (memCgroup says which kind this host has),
// and with -hold the running pods of the memory phase are kept for that long
// while the phase watches what must not suffer: the node's Lease renewals,
// the agent's liveness (/livez: the heartbeat loop alive and the PLEG
// healthy), the pods still running, and the agent's memory stalls (PSI).

// leaseSchedule is the agent's default heartbeat (40 s Lease renewed every
// 10 s with up to 4 % jitter), with 1 s of slack for the API round trip.
var leaseSchedule = fleetsim.Schedule{Interval: 10 * time.Second, Jitter: 0.04, Slack: time.Second, LeaseDuration: 40 * time.Second}

type pressureResult struct {
	Mode        string  `json:"mode"`
	Pods        int     `json:"pods"`
	HoldSeconds float64 `json:"holdSeconds"`
	LimitMiB    float64 `json:"limitMiB"`
	LimitKind   string  `json:"limitKind"`
	// Lease renewals seen (distinct renewTime values), the longest gap
	// between two, and the renewal windows missed (fleetsim.ClassifyGap).
	Renewals    int     `json:"renewals"`
	MaxGapS     float64 `json:"maxGapSeconds"`
	Late        int     `json:"late"`
	Missed      int     `json:"missedWindows"`
	HealthPolls int     `json:"healthPolls"`
	Unhealthy   int     `json:"unhealthyPolls"`
	UnhealthyAt string  `json:"firstUnhealthy,omitempty"`
	PodsRunning int     `json:"podsRunningAtEnd"`
	// PSI "some" of the agent's cgroup: avg60 at the end and its maximum
	// over the hold (sampled every 5 s), and the stalled share of the hold
	// from the total counter. Absent without per-cgroup PSI.
	PSI        bool    `json:"psi"`
	Avg60End   float64 `json:"someAvg60End"`
	Avg60Max   float64 `json:"someAvg60Max"`
	StallPct   float64 `json:"someStallPercentOfHold"`
	WSMax      float64 `json:"workingSetMaxMiB"`
	UsageMax   float64 `json:"usageMaxMiB"`
	LimitHits  int64   `json:"limitHits"`
	OOMKills   int64   `json:"oomKills"`
	AgentAlive bool    `json:"agentAlive"`
}

// hold keeps the agent's pods for d and watches it.
func (b *bench) hold(ctx context.Context, a *agentProc, names []string, d time.Duration) (pressureResult, error) {
	r := pressureResult{Mode: a.mode, Pods: len(names), LimitMiB: float64(b.o.memoryLimit) / (1 << 20), AgentAlive: true}
	if b.o.memoryLimit > 0 {
		r.LimitKind = a.cg.limitKind()
	}
	progress("%s: holding %d pods for %s (memory limit %.0f MiB)", a.mode, len(names), d, r.LimitMiB)
	p0, psiOK, err := a.cg.pressure()
	if err != nil {
		return r, err
	}
	r.PSI = psiOK
	hits0, oom0, err := a.cg.limitEvents()
	if err != nil {
		return r, err
	}
	healthURL := strings.TrimSuffix(a.metricsURL, "/metrics") + "/livez"
	hc := &http.Client{Timeout: 2 * time.Second}
	var renewals []time.Time
	var last time.Time
	start := time.Now()
	end := start.Add(d)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := 0; time.Now().Before(end); i++ {
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-a.exited:
			r.AgentAlive = false
			return r, fmt.Errorf("agent %s exited during the hold: %s", a.mode, tail(a.logPath()))
		case <-tick.C:
		}
		if l, err := b.admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, a.node, metav1.GetOptions{}); err == nil && l.Spec.RenewTime != nil {
			if t := l.Spec.RenewTime.Time; !t.Equal(last) {
				last = t
				if t.After(start) {
					renewals = append(renewals, t)
				}
			}
		}
		r.HealthPolls++
		if err := healthy(ctx, hc, healthURL); err != nil {
			r.Unhealthy++
			if r.UnhealthyAt == "" {
				r.UnhealthyAt = fmt.Sprintf("%s after %s", err, time.Since(start).Round(time.Second))
			}
		}
		if i%5 == 0 {
			if p, ok, err := a.cg.pressure(); err == nil && ok {
				r.Avg60Max = max(r.Avg60Max, p.Avg60)
			}
			if s, err := a.cg.stat(); err == nil {
				r.WSMax, r.UsageMax = max(r.WSMax, s.WorkingSet), max(r.UsageMax, s.Usage)
			}
		}
	}
	wall := time.Since(start)
	r.HoldSeconds = wall.Seconds()
	r.Renewals = len(renewals)
	gaps := renewalGaps(start, renewals, time.Now())
	for _, g := range gaps {
		r.MaxGapS = max(r.MaxGapS, g.Seconds())
		c := fleetsim.ClassifyGap(leaseSchedule, g)
		if c.Late {
			r.Late++
		}
		r.Missed += c.Missed
	}
	if p, ok, err := a.cg.pressure(); err == nil && ok {
		r.Avg60End = p.Avg60
		r.Avg60Max = max(r.Avg60Max, p.Avg60)
		r.StallPct = 100 * float64(p.TotalUs-p0.TotalUs) / float64(wall.Microseconds())
	}
	hits, oom, err := a.cg.limitEvents()
	if err != nil {
		return r, err
	}
	r.LimitHits, r.OOMKills = hits-hits0, oom-oom0
	for _, n := range names {
		if a.tracker.runningNow(n) {
			r.PodsRunning++
		}
	}
	return r, nil
}

// renewalGaps are the gaps a watcher of the Lease sees over the window
// [start, end): start to the first renewal, between renewals, and the last
// to end (a renewal still outstanding counts). The first and last are
// shorter than real gaps, never longer, so no miss is invented.
func renewalGaps(start time.Time, renewals []time.Time, end time.Time) []time.Duration {
	var out []time.Duration
	prev := start
	for _, t := range renewals {
		out = append(out, t.Sub(prev))
		prev = t
	}
	return append(out, end.Sub(prev))
}

func healthy(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/livez %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

func reportPressure(w io.Writer, rs []pressureResult) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nPressure hold (issue 16): the pods kept running under the agent's memory limit (%s); Lease read every 1 s, /livez (heartbeat loop alive and PLEG healthy) polled every 1 s, PSI \"some\" of the agent's cgroup:\n\n", rs[0].LimitKind)
	fmt.Fprintln(w, "| agent | pods | hold s | limit MiB | renewals | max gap s | late | missed windows | /livez failed / polls | pods Running at end | PSI some avg60 end / max % | stalled % of hold | working set max MiB | usage max MiB | limit hits | OOM kills |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rs {
		psi := "n/a"
		stall := "n/a"
		if r.PSI {
			psi, stall = fmt.Sprintf("%.2f / %.2f", r.Avg60End, r.Avg60Max), fmt.Sprintf("%.3f", r.StallPct)
		}
		fmt.Fprintf(w, "| %s | %d | %.0f | %.0f | %d | %.1f | %d | %d | %d / %d | %d | %s | %s | %.1f | %.1f | %d | %d |\n", modeTitle[r.Mode], r.Pods, r.HoldSeconds, r.LimitMiB,
			r.Renewals, r.MaxGapS, r.Late, r.Missed, r.Unhealthy, r.HealthPolls, r.PodsRunning, psi, stall, r.WSMax, r.UsageMax, r.LimitHits, r.OOMKills)
		if r.UnhealthyAt != "" {
			fmt.Fprintf(w, "\n%s: first failed health check: %s\n", modeTitle[r.Mode], r.UnhealthyAt)
		}
	}
	fmt.Fprintln(w)
	for _, r := range rs {
		verdict := "met"
		if r.Missed > 0 || r.Unhealthy > 0 || r.PodsRunning < r.Pods || !r.PSI || r.Avg60Max >= 1 {
			verdict = "MISSED"
		}
		fmt.Fprintf(w, "Target (%s, %.0f MiB, %d pods, %.0f s): no missed renewal window, PLEG healthy, PSI some avg60 < 1 %%: %s.\n",
			modeTitle[r.Mode], r.LimitMiB, r.Pods, r.HoldSeconds, verdict)
	}
}

// issue16Verdict judges a sample of the event-driven agent against issue
// 16's targets: idle (no pods) RSS ≤ 35, anonymous ≤ 12 and working set ≤ 15
// MiB; with pods anonymous ≤ 25 and working set ≤ 35 MiB.
func issue16Verdict(s memSample) string {
	type target struct {
		what      string
		got, most float64
	}
	ts := []target{{"RSS", s.RSSMiB, 35}, {"anonymous", s.AnonMiB, 12}, {"working set", s.WorkingSetMiB, 15}}
	if s.Pods > 0 {
		ts = []target{{"anonymous", s.AnonMiB, 25}, {"working set", s.WorkingSetMiB, 35}}
	}
	var parts []string
	for _, t := range ts {
		v := "met"
		if t.got > t.most {
			v = "MISSED"
		}
		parts = append(parts, fmt.Sprintf("%s ≤ %.0f MiB %s (%.1f)", t.what, t.most, v, t.got))
	}
	return fmt.Sprintf("Issue 16 targets with %d pods (event-driven, %s): %s.", s.Pods, s.When, strings.Join(parts, ", "))
}
