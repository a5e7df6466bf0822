//go:build nodeagent_profile

// Profiling for benchmarks only (docs/benchmarks.md, "Where the time and
// memory go"): a build with -tags nodeagent_profile writes, while
// $NODEAGENT_PROFILE_DIR is set, a CPU profile per interval
// ($NODEAGENT_PROFILE_INTERVAL, default 10s) and a heap profile with the
// runtime's MemStats at the end of each, named by the interval's start in
// Unix milliseconds; $NODEAGENT_MEMPROFILE_RATE sets runtime.MemProfileRate
// (default 512 KiB: too coarse for a heap of a few MiB; 4096 samples it
// finely). Release builds do not contain this file, and it adds no
// endpoint. The node API's /debug/pprof/ (kubelet's enableProfilingHandler)
// takes one profile on request; this file is for what it cannot: profiles
// from the process's start, back to back for a whole benchmark, at a heap
// sampling rate that must be set before the first allocation, from agents
// whose node API the benchmark tools do not reach.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"
)

func init() {
	dir := os.Getenv("NODEAGENT_PROFILE_DIR")
	if dir == "" {
		return
	}
	if r, err := strconv.Atoi(os.Getenv("NODEAGENT_MEMPROFILE_RATE")); err == nil && r > 0 {
		runtime.MemProfileRate = r
	}
	every := 10 * time.Second
	if d, err := time.ParseDuration(os.Getenv("NODEAGENT_PROFILE_INTERVAL")); err == nil && d > 0 {
		every = d
	}
	dir = filepath.Join(dir, fmt.Sprint(os.Getpid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return
	}
	go func() {
		for {
			start := time.Now().UnixMilli()
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%d.pprof", start)))
			if err != nil {
				return
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				f.Close()
				return
			}
			time.Sleep(every)
			pprof.StopCPUProfile()
			f.Close()
			if h, err := os.Create(filepath.Join(dir, fmt.Sprintf("heap-%d.pprof", start))); err == nil {
				runtime.GC()
				_ = pprof.Lookup("heap").WriteTo(h, 0)
				h.Close()
			}
			if h, err := os.Create(filepath.Join(dir, fmt.Sprintf("heap-%d.txt", start))); err == nil {
				_ = pprof.Lookup("heap").WriteTo(h, 1) // MemStats at the end
				h.Close()
			}
			if h, err := os.Create(filepath.Join(dir, fmt.Sprintf("goroutine-%d.txt", start))); err == nil {
				_ = pprof.Lookup("goroutine").WriteTo(h, 1)
				h.Close()
			}
		}
	}()
}
