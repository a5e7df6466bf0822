package config_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/config"
)

func ExampleLoad() {
	cfg, warnings, err := config.Load(config.LoadOptions{Path: "testdata/nodeagent-config.yaml"})
	if err != nil {
		fmt.Println(err) // every problem, one per line, with file and field path
		return
	}
	for _, w := range warnings {
		fmt.Println("warning:", w)
	}
	fmt.Println(cfg.NodeLeaseDurationSeconds, cfg.RenewInterval(), cfg.PLEG.EventSources)
	// Output: 40 10s [containerd]
}

// ExampleWatcher shows the wiring in cmd/nodeagent: load once, start the
// watcher with the loaded configuration, forward SIGHUP to Trigger and
// apply the live fields of each update.
func ExampleWatcher() {
	o := config.LoadOptions{Path: "/etc/nodeagent/config.yaml", DropInDir: "/etc/nodeagent/config.d"}
	cfg, _, err := config.Load(o)
	if err != nil {
		os.Exit(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := config.NewWatcher(o, slog.Default(), clock.RealClock{}, cfg)
	go func() { _ = w.Run(ctx) }()

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			w.Trigger()
		case next := <-w.Updates():
			// Only LiveFields differ from the running configuration.
			fmt.Println("lease", next.NodeLeaseDurationSeconds, "renew every", next.RenewInterval())
		}
	}
}
