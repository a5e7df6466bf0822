// Command gotestfilter reads `go test -json` on standard input and prints
// what plain `go test` prints: each package's closing line (ok, FAIL, ?) and
// the output of the tests that failed. It also catches what plain `go test`
// hides: tests that skipped themselves. A skip is allowed only when
// hack/expected-skips.txt names the test with why (a test that only runs
// under a switch, a helper process); any other skip fails the run, so that a
// phase cannot skip itself to green because something it needs is missing.
//
//	go test -json ./... | gotestfilter [--allow FILE] [--slowest N]
//
// At the end it lists the N slowest top-level tests (default 10), so that
// the CI budget (docs/testing.md) can be spent where it buys most, and then
// each failed test's own messages (its file:line lines, without the agent
// logs it copied), so that the last lines of a run say why it failed.
//
// The exit status is 1 when a test or package failed, a test skipped
// without being allowed, or the input held no test at all; 0 otherwise.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Event is one line of `go test -json` (cmd/test2json).
type Event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64 // seconds, on pass and fail
}

// Allowed is a skip the list permits: a package (regexp), a test (regexp),
// and why.
type Allowed struct {
	Package, Test *regexp.Regexp
	Why           string
}

// ParseAllowed reads lines "<package regexp> <test regexp> | <why>"; "#"
// starts a comment.
func ParseAllowed(text string) ([]Allowed, error) {
	var out []Allowed
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		spec, why, ok := strings.Cut(line, " | ")
		f := strings.Fields(spec)
		if !ok || len(f) != 2 || strings.TrimSpace(why) == "" {
			return nil, fmt.Errorf("line %d: want \"<package regexp> <test regexp> | <why>\", got %q", i+1, line)
		}
		pk, err := regexp.Compile("^(" + f[0] + ")$")
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		tr, err := regexp.Compile("^(" + f[1] + ")$")
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		out = append(out, Allowed{pk, tr, strings.TrimSpace(why)})
	}
	return out, nil
}

func allowed(list []Allowed, pkg, test string) bool {
	for _, a := range list {
		if a.Package.MatchString(pkg) && a.Test.MatchString(test) {
			return true
		}
	}
	return false
}

// Summary is what a stream held.
type Summary struct {
	Passed, Failed, Skipped int
	FailedPackages          []string
	Unexpected              []string // "pkg TestX: reason"
	AllowedSkips            int
	Durations               []Duration // top-level tests that ended, slowest first
	Reports                 []Report   // the failed tests' own messages, in order of failure
}

// Report is what a failed test said itself: its t.Log/t.Error lines
// (file:line headers, each with a few of its continuation lines), without
// the bulk of what it copied from the processes it ran. A failed test's
// whole output can be thousands of lines of agent logs, and a CI report
// that keeps only the tail of the run loses the line that says why.
type Report struct {
	Package, Test string
	Lines         []string
}

// reportHeader matches the first line of a t.Log or t.Error message.
var reportHeader = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: `)

// ownLines picks a failed test's own messages out of its output: every
// file:line header (at most 300 characters of it) with up to three of its
// continuation lines that are not log records (time=...), the last 30
// such messages.
func ownLines(output []string) []string {
	const maxMsgs, maxCont, maxLen = 30, 3, 300
	var msgs [][]string
	cont := 0
	for _, chunk := range output {
		for _, l := range strings.Split(strings.TrimRight(chunk, "\n"), "\n") {
			header := reportHeader.MatchString(l)
			if len(l) > maxLen {
				l = l[:maxLen] + "…"
			}
			switch {
			case header:
				msgs = append(msgs, []string{l})
				cont = 0
			case len(msgs) > 0 && cont < maxCont && strings.TrimSpace(l) != "" &&
				!strings.HasPrefix(strings.TrimSpace(l), "time=") && !strings.HasPrefix(l, "=== ") && !strings.HasPrefix(l, "--- "):
				msgs[len(msgs)-1] = append(msgs[len(msgs)-1], l)
				cont++
			default:
				cont = maxCont // a log record or a blank ends the message's continuation
			}
		}
	}
	if len(msgs) > maxMsgs {
		msgs = msgs[len(msgs)-maxMsgs:]
	}
	var out []string
	for _, m := range msgs {
		out = append(out, m...)
	}
	return out
}

// Duration is how long one top-level test ran.
type Duration struct {
	Package, Test string
	Seconds       float64
}

// Filter copies the plain output of in to out and returns the summary.
func Filter(in io.Reader, out io.Writer, allow []Allowed) (Summary, error) {
	var s Summary
	type key struct{ pkg, test string }
	buf := map[key][]string{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e Event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Not an event (a build error printed by go itself): pass it on.
			fmt.Fprintln(out, string(line))
			continue
		}
		k := key{e.Package, e.Test}
		if (e.Action == "pass" || e.Action == "fail") && e.Test != "" && !strings.Contains(e.Test, "/") {
			s.Durations = append(s.Durations, Duration{e.Package, e.Test, e.Elapsed})
		}
		switch e.Action {
		case "output":
			if e.Test == "" {
				// Package-level lines: "ok ...", "FAIL ...", "--- FAIL" of
				// TestMain, panics outside tests, the coverage line.
				if !strings.HasPrefix(e.Output, "=== RUN") && !strings.HasPrefix(e.Output, "PASS\n") {
					fmt.Fprint(out, e.Output)
				}
				continue
			}
			buf[k] = append(buf[k], e.Output)
		case "pass":
			if e.Test != "" {
				s.Passed++
			}
			delete(buf, k)
		case "fail":
			if e.Test == "" {
				// A package that panicked or timed out ends its running
				// tests without their own events: show what they printed.
				for bk, o := range buf {
					if bk.pkg == e.Package {
						fmt.Fprintf(out, "--- unfinished: %s\n%s", bk.test, strings.Join(o, ""))
						delete(buf, bk)
					}
				}
				s.FailedPackages = append(s.FailedPackages, e.Package)
				continue
			}
			s.Failed++
			for _, o := range buf[k] {
				fmt.Fprint(out, o)
			}
			s.Reports = append(s.Reports, Report{e.Package, e.Test, ownLines(buf[k])})
			delete(buf, k)
		case "skip":
			if e.Test == "" {
				continue // a package without tests
			}
			s.Skipped++
			if allowed(allow, e.Package, e.Test) {
				s.AllowedSkips++
			} else {
				reason := ""
				for _, o := range buf[k] {
					if t := strings.TrimSpace(o); t != "" && !strings.HasPrefix(t, "=== ") && !strings.HasPrefix(t, "--- SKIP") {
						reason = t
					}
				}
				s.Unexpected = append(s.Unexpected, fmt.Sprintf("%s %s: %s", e.Package, e.Test, reason))
			}
			delete(buf, k)
		}
	}
	slices.SortStableFunc(s.Durations, func(a, b Duration) int {
		switch {
		case a.Seconds > b.Seconds:
			return -1
		case a.Seconds < b.Seconds:
			return 1
		}
		return 0
	})
	return s, sc.Err()
}

func main() {
	allowPath := flag.String("allow", "hack/expected-skips.txt", "the skips that are allowed, each with why")
	slowest := flag.Int("slowest", 10, "list this many of the slowest top-level tests")
	flag.Parse()
	var allow []Allowed
	if b, err := os.ReadFile(*allowPath); err != nil {
		fmt.Fprintf(os.Stderr, "gotestfilter: %v\n", err)
		os.Exit(2)
	} else if allow, err = ParseAllowed(string(b)); err != nil {
		fmt.Fprintf(os.Stderr, "gotestfilter: %s: %v\n", *allowPath, err)
		os.Exit(2)
	}
	s, err := Filter(os.Stdin, os.Stdout, allow)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gotestfilter: reading go test -json: %v\n", err)
		os.Exit(1)
	}
	slices.Sort(s.Unexpected)
	if n := min(*slowest, len(s.Durations)); n > 0 {
		fmt.Printf("gotestfilter: the %d slowest tests:\n", n)
		for _, d := range s.Durations[:n] {
			fmt.Printf("  %7.1fs  %s %s\n", d.Seconds, d.Package, d.Test)
		}
	}
	fmt.Printf("gotestfilter: %d skips allowed by %s\n", s.AllowedSkips, *allowPath)
	fmt.Printf("gotestfilter: %d passed, %d failed, %d skipped\n", s.Passed, s.Failed, s.Skipped)
	rc := 0
	if len(s.Unexpected) > 0 {
		fmt.Printf("gotestfilter: %d tests skipped themselves without being allowed (fix what they need, or list them with why in %s):\n", len(s.Unexpected), *allowPath)
		for _, u := range s.Unexpected {
			fmt.Printf("  %s\n", u)
		}
		rc = 1
	}
	if len(s.Reports) > 0 {
		fmt.Printf("gotestfilter: what the %d failed tests reported themselves (their whole output is above):\n", len(s.Reports))
		for _, r := range s.Reports {
			fmt.Printf("--- FAIL: %s %s\n", r.Package, r.Test)
			for _, l := range r.Lines {
				fmt.Println(l)
			}
		}
	}
	if s.Failed > 0 || len(s.FailedPackages) > 0 {
		rc = 1
	}
	if s.Passed+s.Failed == 0 {
		fmt.Println("gotestfilter: no test ran")
		rc = 1
	}
	os.Exit(rc)
}
