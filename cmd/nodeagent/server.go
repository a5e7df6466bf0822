package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nodeagent/nodeagent/nodeapi"
	"github.com/nodeagent/nodeagent/pleg"
)

// startServer serves /healthz, /livez, /readyz, /metrics and /events on
// healthzBindAddress:healthzPort (127.0.0.1:10266 by default; port 0 turns it
// off). A port that cannot be bound is a start-up error naming it.
func (a *agent) startServer() (*http.Server, error) {
	if a.cfg.HealthzPort == 0 {
		a.log.Info("health server disabled (healthzPort: 0)")
		return nil, nil
	}
	addr := net.JoinHostPort(a.cfg.HealthzBindAddress, strconv.Itoa(int(a.cfg.HealthzPort)))
	mux := a.healthMux()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("health server on %s: %w (set healthzPort to a free port, or 0 to disable)", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("health server stopped", "err", err)
		}
	}()
	a.log.Info("serving health and metrics", "address", "http://"+addr)
	return srv, nil
}

// healthMux is the health server's handlers. /healthz (and /healthz/ping)
// is kubelet's healthz port's: the ping check alone, in the apiserver
// healthz format (kubelet installs no other check there; its syncloop
// check is the node API's /healthz), ok while the agent serves. /livez
// is the agent's liveness (the heartbeat loop and the PLEG, as the
// systemd watchdog), /readyz its readiness.
func (a *agent) healthMux() *http.ServeMux {
	mux := http.NewServeMux()
	nodeapi.InstallPingHealthz(mux, a.log)
	mux.Handle("/livez", check(a.live))
	mux.Handle("/readyz", check(a.ready))
	mux.Handle("/metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{Registry: a.reg}))
	mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		p := a.pl.Load()
		if p == nil {
			_, err := a.runtimeOrErr()
			if err == nil {
				err = errors.New("PLEG not started")
			}
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		pleg.EventsHandler(p).ServeHTTP(w, r)
	})
	return mux
}

// check serves a health check: 200 "ok", or 500 with the reason.
func check(f func() error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := f(); err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "unhealthy: %v\n", err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
}
