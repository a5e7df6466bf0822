package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// tracedPod is one measured pod: its UID and the measured interval.
type tracedPod struct {
	uid        string
	begin, end time.Time
}

// traceLine is one line of nodeagent's latency trace (-v=4, JSON logs):
// the PLEG's events ("pod lifecycle event"), the pod worker's syncs ("pod
// sync begins", "pod sync steps") and the status manager's writes ("pod
// status write"). Durations are in nanoseconds (slog's JSON).
type traceLine struct {
	at    time.Time
	msg   string
	attrs map[string]any
}

var traceMsgs = map[string]bool{
	"pod lifecycle event": true, "pod sync begins": true, "pod sync steps": true, "pod status write": true,
}

// readTrace reads the trace lines of the given pods from agent logs.
func readTrace(files []string, uids map[string]bool) map[string][]traceLine {
	out := map[string][]traceLine{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			l := sc.Bytes()
			if len(l) == 0 || l[0] != '{' {
				continue
			}
			var m map[string]any
			if json.Unmarshal(l, &m) != nil {
				continue
			}
			msg, _ := m["msg"].(string)
			uid, _ := m["podUID"].(string)
			if !traceMsgs[msg] || !uids[uid] {
				continue
			}
			ts, _ := m["time"].(string)
			at, err := time.Parse(time.RFC3339Nano, ts)
			if err != nil {
				continue
			}
			for _, k := range []string{"time", "level", "msg", "podUID", "pod", "logger"} {
				delete(m, k)
			}
			out[uid] = append(out[uid], traceLine{at: at, msg: msg, attrs: m})
		}
		fh.Close()
	}
	for _, ls := range out {
		sort.SliceStable(ls, func(i, j int) bool { return ls[i].at.Before(ls[j].at) })
	}
	return out
}

// traceReport prints, for each traced pod, the agent's trace lines between
// the measured interval's start and end as offsets from the start (ms),
// then the end as the bench saw it. Nothing without trace lines (the agent
// ran without -v=4).
func traceReport(agent string, r *results) string {
	uids := map[string]bool{}
	for _, p := range append(append([]tracedPod(nil), r.exits...), r.starts...) {
		uids[p.uid] = true
	}
	tr := readTrace(r.logs_, uids)
	if len(tr) == 0 {
		return ""
	}
	var w strings.Builder
	section := func(title string, ps []tracedPod) {
		fmt.Fprintf(&w, "\nlatency trace, %s, %s (ms from the start; durations in ms):\n", agent, title)
		for _, p := range ps {
			fmt.Fprintf(&w, "- pod %s, %.1f ms:", p.uid, msf(p.end.Sub(p.begin)))
			for _, l := range tr[p.uid] {
				if l.at.Before(p.begin.Add(-time.Millisecond)) || l.at.After(p.end.Add(time.Second)) {
					continue
				}
				fmt.Fprintf(&w, " [+%.1f %s%s]", msf(l.at.Sub(p.begin)), l.msg, attrs(l.attrs))
			}
			fmt.Fprintln(&w)
		}
	}
	section("container exit → Succeeded in the watch", r.exits)
	section("pod create → Ready in the watch, one at a time", r.starts)
	return w.String()
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// attrs formats a trace line's attributes: numbers as milliseconds.
func attrs(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		switch v := m[k].(type) {
		case float64:
			fmt.Fprintf(&b, " %s=%.1f", k, v/1e6)
		case nil:
		default:
			fmt.Fprintf(&b, " %s=%v", k, v)
		}
	}
	return b.String()
}
