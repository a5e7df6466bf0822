package pleg

import (
	"encoding/json"
	"net/http"
	"sync"
)

// broadcaster fans raw events (before expectation filtering) out to stream
// subscribers such as the /events endpoint. Each subscriber has a bounded
// channel; when it is full the event is dropped for that subscriber and
// counted (consumer="stream"), so a slow reader never slows the PLEG.
type broadcaster struct {
	m    *metrics
	mu   sync.Mutex
	subs map[chan Event]struct{}
}

func newBroadcaster(m *metrics) *broadcaster {
	return &broadcaster{m: m, subs: map[chan Event]struct{}{}}
}

func (b *broadcaster) subscribe() chan Event {
	ch := make(chan Event, DefaultStreamBuffer)
	b.mu.Lock()
	b.subs[ch] = struct{}{}
	b.mu.Unlock()
	return ch
}

func (b *broadcaster) unsubscribe(ch chan Event) {
	b.mu.Lock()
	delete(b.subs, ch)
	b.mu.Unlock()
}

func (b *broadcaster) publish(ev Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- ev:
		default:
			b.m.discarded.WithLabelValues("stream").Inc()
		}
	}
}

// Subscribe returns a channel of every event the PLEG generates (including
// expected ones, which Watch filters) and a function that ends the
// subscription. The channel holds 256 events; a subscriber that falls
// further behind loses events (counted as discarded, consumer="stream").
func (p *PLEG) Subscribe() (<-chan Event, func()) {
	ch := p.bc.subscribe()
	return ch, func() { p.bc.unsubscribe(ch) }
}

// EventsHandler streams the PLEG's events as JSON lines (one Event object
// per line: time, pod, podUID, container, containerID, type, source,
// exitCode) until the client goes away. The optional query parameter
// "pod" (namespace/name) filters by pod. The agent mounts it at /events.
func EventsHandler(p *PLEG) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "only GET is supported", http.StatusMethodNotAllowed)
			return
		}
		pod := r.URL.Query().Get("pod")
		ch, cancel := p.Subscribe()
		defer cancel()
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		flusher, _ := w.(http.Flusher)
		if flusher != nil {
			flusher.Flush() // tell the client the subscription is live
		}
		enc := json.NewEncoder(w)
		for {
			select {
			case <-r.Context().Done():
				return
			case ev := <-ch:
				if pod != "" && ev.Pod != pod {
					continue
				}
				if err := enc.Encode(ev); err != nil {
					return
				}
				if flusher != nil {
					flusher.Flush()
				}
			}
		}
	})
}
