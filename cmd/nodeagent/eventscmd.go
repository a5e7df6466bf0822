package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// defaultEventsAddress is the agent's health server, where /events is mounted.
const defaultEventsAddress = "http://127.0.0.1:10266"

// runEventsCommand implements "nodeagent events": it follows the running
// agent's PLEG events (GET <address>/events) and prints them as JSON lines,
// one event per line (time, pod, podUID, container, containerID, type,
// source, exitCode), until interrupted or the agent goes away.
func runEventsCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("nodeagent events", flag.ContinueOnError)
	fs.SetOutput(stderr)
	address := fs.String("address", defaultEventsAddress, "base URL of the agent's local health server")
	pod := fs.String("pod", "", "only events of this pod (namespace/name)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: nodeagent events [--address URL] [--pod NAMESPACE/NAME]\n\n"+
			"Follows the running agent's pod lifecycle events as JSON lines.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "nodeagent events: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *pod != "" && strings.Count(*pod, "/") != 1 {
		fmt.Fprintf(stderr, "nodeagent events: --pod %q is not NAMESPACE/NAME\n", *pod)
		return 2
	}
	u, err := url.Parse(*address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintf(stderr, "nodeagent events: --address %q is not an http(s) URL\n", *address)
		return 2
	}
	u = u.JoinPath("events")
	if *pod != "" {
		u.RawQuery = url.Values{"pod": {*pod}}.Encode()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		fmt.Fprintf(stderr, "nodeagent events: %v\n", err)
		return 1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "nodeagent events: cannot reach the agent at %s (is it running?): %v\n", *address, err)
		return 1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		fmt.Fprintf(stderr, "nodeagent events: %s: %s %s\n", u, resp.Status, strings.TrimSpace(string(body)))
		return 1
	}
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			if _, werr := stdout.Write(line); werr != nil {
				return 1 // stdout closed (for example a pipe to head)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return 0
			}
			if errors.Is(err, io.EOF) {
				fmt.Fprintln(stderr, "nodeagent events: the agent closed the stream")
			} else {
				fmt.Fprintf(stderr, "nodeagent events: %v\n", err)
			}
			return 1
		}
	}
}
