package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nodeagent/nodeagent/crilog"
	"github.com/nodeagent/nodeagent/nodestatus"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods"
	"github.com/nodeagent/nodeagent/runtime"
)

// connectRuntime connects to containerd, retrying with backoff (1s doubling
// to 30s) and logging why, then starts the PLEG. A missing containerd never
// stops the agent: the node heartbeats and reports Ready=False naming the
// cause until containerd is there.
func (a *agent) connectRuntime(ctx context.Context) {
	log := a.log.With("component", "runtime", "endpoint", a.cfg.ContainerRuntimeEndpoint)
	backoff := time.Second
	for {
		rt, err := runtime.New(runtime.Options{
			Address:   a.cfg.ContainerRuntimeEndpoint,
			Namespace: a.cfg.ContainerRuntimeNamespace,
			Logger:    log,
			// The agent's own binary writes each container's log (CRI
			// format, rotation), started by the shim so that it
			// outlives the agent.
			ContainerLogger: a.containerLogger,
			LogRotation:     crilog.Rotation{MaxSize: a.cfg.ContainerLogMaxBytes(), MaxFiles: int(a.cfg.ContainerLogMaxFiles)},
		})
		if err == nil {
			var v runtime.Version
			if v, err = rt.Version(ctx); err == nil {
				a.rt.Store(rt)
				log.Info("connected to the container runtime", "version", v.RuntimeVersion)
				a.startPLEG(ctx, rt)
				return
			}
			_ = rt.Close()
		}
		a.rtErr.Store(&err)
		log.Warn("container runtime unreachable; retrying", "err", err, "retryIn", backoff)
		select {
		case <-ctx.Done():
			return
		case <-a.clock.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func (a *agent) startPLEG(ctx context.Context, rt *runtime.Runtime) {
	var sources []pleg.Source
	for _, s := range a.cfg.PLEG.EventSources {
		src, err := pleg.ParseSource(s)
		if err != nil { // config validation makes this unreachable
			a.log.Error("ignoring PLEG event source", "err", err)
			continue
		}
		sources = append(sources, src)
	}
	p, err := pleg.New(rt, pleg.Options{
		RelistPeriod:         a.cfg.PLEG.RelistPeriod.Duration,
		FallbackRelistPeriod: a.cfg.PLEG.FallbackRelistPeriod.Duration,
		HealthThreshold:      a.cfg.PLEG.HealthThreshold.Duration,
		Sources:              sources,
		Namespace:            a.cfg.ContainerRuntimeNamespace,
		Endpoint:             a.cfg.ContainerRuntimeEndpoint,
		Logger:               a.base.With("component", "pleg"),
		Registerer:           a.reg,
	})
	if err != nil {
		a.log.Error("cannot start the PLEG", "err", err)
		return
	}
	a.pl.Store(p)
	go p.Run(ctx)
	a.startPods(ctx, rt, p)
}

// startPods runs the pod workers for static pods and the API server's pods
// bound to this node.
func (a *agent) startPods(ctx context.Context, rt *runtime.Runtime, p *pleg.PLEG) {
	pm, err := pods.New(pods.Options{
		NodeName:      a.nodeName,
		Client:        a.client,
		StaticPodPath: a.cfg.StaticPodPath,
		RootDir:       a.cfg.RootDir,
		MaxPods:       int(a.cfg.MaxPods),
		Node:          a.ns.Node,
		Runtime:       rt,
		PLEG:          p,
		Registerer:    a.reg,
		Logger:        a.base.With("component", "pods"),
	})
	if err != nil {
		a.log.Error("cannot start the pod workers", "err", err)
		return
	}
	a.apiPods.use(pm)
	go func() {
		if err := pm.Run(ctx); err != nil {
			a.log.Error("pod workers stopped", "err", err)
		}
	}()
}

var errRuntimeNotConnected = errors.New("container runtime not connected")

func (a *agent) runtimeOrErr() (*runtime.Runtime, error) {
	if rt := a.rt.Load(); rt != nil {
		return rt, nil
	}
	if e := a.rtErr.Load(); e != nil {
		return nil, fmt.Errorf("%w: %v", errRuntimeNotConnected, *e)
	}
	return nil, errRuntimeNotConnected
}

func (a *agent) runtimeHealthy() error {
	_, err := a.runtimeOrErr()
	return err
}

func (a *agent) runtimeVersion(ctx context.Context) (string, string, error) {
	rt, err := a.runtimeOrErr()
	if err != nil {
		return "", "", err
	}
	v, err := rt.Version(ctx)
	if err != nil {
		return "", "", err
	}
	return v.RuntimeName, v.RuntimeVersion, nil
}

func (a *agent) listImages(ctx context.Context) ([]nodestatus.Image, error) {
	rt, err := a.runtimeOrErr()
	if err != nil {
		return nil, err
	}
	imgs, err := rt.ListImages(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]nodestatus.Image, 0, len(imgs))
	for _, im := range imgs {
		out = append(out, nodestatus.Image{ID: im.ID, Names: im.Names, SizeBytes: im.Size})
	}
	return out, nil
}
