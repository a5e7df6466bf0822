package main

import (
	"fmt"
	"strings"
	"testing"
)

const stream = `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:1: fine\n"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":1.5}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:2: broke\n"}
{"Action":"output","Package":"p","Test":"TestB","Output":"--- FAIL: TestB (0.00s)\n"}
{"Action":"run","Package":"p","Test":"TestB/sub"}
{"Action":"pass","Package":"p","Test":"TestB/sub","Elapsed":9}
{"Action":"fail","Package":"p","Test":"TestB","Elapsed":2.25}
{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:3: needs root\n"}
{"Action":"output","Package":"p","Test":"TestC","Output":"--- SKIP: TestC (0.00s)\n"}
{"Action":"skip","Package":"p","Test":"TestC"}
{"Action":"output","Package":"p","Test":"TestSoak","Output":"--- SKIP: TestSoak (0.00s)\n"}
{"Action":"skip","Package":"p","Test":"TestSoak"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t0.1s\n"}
{"Action":"fail","Package":"p"}
{"Action":"output","Package":"q","Test":"TestHang","Output":"still going\n"}
{"Action":"output","Package":"q","Output":"panic: test timed out\n"}
{"Action":"fail","Package":"q"}
not json: a build error
`

func TestFilter(t *testing.T) {
	allow, err := ParseAllowed("# c\np TestSoak | only under make soak\n")
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	s, err := Filter(strings.NewReader(stream), &out, allow)
	if err != nil {
		t.Fatal(err)
	}
	if s.Passed != 2 || s.Failed != 1 || s.Skipped != 2 || s.AllowedSkips != 1 || len(s.FailedPackages) != 2 {
		t.Fatalf("summary %+v", s)
	}
	if len(s.Unexpected) != 1 || s.Unexpected[0] != "p TestC: c_test.go:3: needs root" {
		t.Fatalf("unexpected skips %q", s.Unexpected)
	}
	got := out.String()
	for _, want := range []string{"b_test.go:2: broke\n--- FAIL: TestB", "FAIL\tp\t0.1s\n", "--- unfinished: TestHang\nstill going\n", "panic: test timed out\n", "not json: a build error\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	// Top-level tests only, slowest first; skips have no duration.
	if len(s.Durations) != 2 || s.Durations[0] != (Duration{"p", "TestB", 2.25}) || s.Durations[1] != (Duration{"p", "TestA", 1.5}) {
		t.Errorf("durations %+v", s.Durations)
	}
	if strings.Contains(got, "fine") {
		t.Errorf("a passing test's output was printed:\n%s", got)
	}
}

func TestParseAllowedRejectsBadLines(t *testing.T) {
	for _, bad := range []string{"p TestX\n", "p | why\n", "p TestX | \n", "p ( | why\n"} {
		if _, err := ParseAllowed(bad); err == nil {
			t.Errorf("ParseAllowed(%q) succeeded", bad)
		}
	}
}

// A failed test's own messages are picked out of the agent logs it copied,
// so that the end of a CI report says why it failed.
func TestOwnLines(t *testing.T) {
	out := []string{
		"=== RUN   TestKill\n",
		"    kill_test.go:104: 12 kills in 2m0s\n",
		"    harness_test.go:80: agent output:\n        time=2026-11-28T03:30:29Z level=INFO msg=\"pod removed\"\n",
		"        time=2026-11-28T03:30:30Z level=INFO msg=x\n",
		"    kill_test.go:124: not converged within 3m after the last kill: pod a Pending\n",
		"        pod b: container c waiting\n",
		"    " + strings.Repeat("x", 400) + ".go:1: long\n",
		"--- FAIL: TestKill (298.20s)\n",
	}
	got := strings.Join(ownLines(out), "\n")
	for _, want := range []string{"kill_test.go:104: 12 kills", "harness_test.go:80: agent output:", "kill_test.go:124: not converged within 3m after the last kill: pod a Pending\n        pod b: container c waiting"} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "time=") || strings.Contains(got, "--- FAIL") || strings.Contains(got, "=== RUN") {
		t.Errorf("log records or test2json framing kept:\n%s", got)
	}
	var msgs []string
	for i := range 40 {
		msgs = append(msgs, fmt.Sprintf("    a_test.go:%d: m\n", i))
	}
	if l := ownLines(msgs); len(l) != 30 || l[0] != "    a_test.go:10: m" {
		t.Errorf("want the last 30 messages, got %d from %q", len(l), l[0])
	}
}
