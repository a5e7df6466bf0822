package runtime

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// A pull has no deadline; it fails when it stops making progress, as with
// containerd's CRI plugin (image_pull_progress_timeout): every HTTP request
// of the pull goes through a transport that counts the open requests and
// the response bytes read, a watchdog samples the counters, and a pull with
// a request open and no new byte for longer than the timeout is cancelled.
// A slow pull that keeps receiving bytes runs as long as it needs; so does
// the unpacking after the last byte (no request is open then).

// pullProgressCheckInterval is how often the watchdog samples a pull
// (containerd's defaultPullProgressReportInterval), or half the timeout
// when that is shorter.
const pullProgressCheckInterval = 10 * time.Second

// pullProgress counts one pull's open HTTP requests and bytes read.
type pullProgress struct {
	active atomic.Int32
	bytes  atomic.Uint64
}

// updateClient makes c count into p (a config.UpdateClientFunc).
func (p *pullProgress) updateClient(c *http.Client) error {
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c.Transport = &countingTransport{rt: rt, p: p}
	return nil
}

func (p *pullProgress) status() (int32, uint64) { return p.active.Load(), p.bytes.Load() }

// countingTransport counts a request as open from the moment it is sent
// until its response body is closed, and the body's bytes as they are read.
type countingTransport struct {
	rt http.RoundTripper
	p  *pullProgress
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.p.active.Add(1)
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		t.p.active.Add(-1)
		return nil, err
	}
	resp.Body = &countingBody{ReadCloser: resp.Body, p: t.p}
	return resp, nil
}

type countingBody struct {
	io.ReadCloser
	p    *pullProgress
	once sync.Once
}

func (b *countingBody) Read(buf []byte) (int, error) {
	n, err := b.ReadCloser.Read(buf)
	b.p.bytes.Add(uint64(n))
	return n, err
}

func (b *countingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.p.active.Add(-1) })
	return err
}

// stallWatch decides from samples of a pull's counters whether it stalled.
type stallWatch struct {
	timeout      time.Duration
	lastBytes    uint64
	lastProgress time.Time
}

// observe records the counters sampled at now and says whether the pull
// stalled: a request is open and no byte arrived for longer than the
// timeout. No open request (resolving, unpacking, between requests) counts
// as progress, as in containerd.
func (s *stallWatch) observe(now time.Time, active int32, bytes uint64) bool {
	if active == 0 || bytes > s.lastBytes {
		s.lastBytes, s.lastProgress = bytes, now
		return false
	}
	return now.Sub(s.lastProgress) > s.timeout
}

// checkInterval is how often a pull with this timeout is sampled.
func checkInterval(timeout time.Duration) time.Duration {
	if timeout < pullProgressCheckInterval {
		return timeout / 2
	}
	return pullProgressCheckInterval
}

// watchPull samples prog until the returned stop is called or ctx ends,
// and calls onStall once if the pull stalls. A negative
// Options.PullProgressTimeout turns the watchdog off.
func (r *Runtime) watchPull(ctx context.Context, prog *pullProgress, onStall func()) (stop func()) {
	timeout := r.opts.PullProgressTimeout
	if timeout < 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	w := &stallWatch{timeout: timeout, lastProgress: r.opts.Clock.Now()}
	t := r.opts.Clock.NewTicker(checkInterval(timeout))
	go func() {
		defer close(done)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				active, bytes := prog.status()
				if w.observe(r.opts.Clock.Now(), active, bytes) {
					r.opts.Logger.Warn("cancelling an image pull that made no progress",
						"timeout", timeout, "bytesRead", bytes, "openRequests", active)
					onStall()
					return
				}
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
