package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const list = `# header
# second line

## Probes
[sig-node] Probing container a | no prober | failed: no prober
[sig-node] Probing container b | no prober | timedout: .

## Hooks
[sig-node] Hook c | no hooks | not run
`

var gate = regexp.MustCompile(`^\[sig-node\] NodeLease `)

func TestParseKnownRoundTrips(t *testing.T) {
	k, err := ParseKnown(list)
	if err != nil {
		t.Fatal(err)
	}
	if k.Len() != 3 || len(k.Groups) != 2 || k.Groups[1].Entries[0].Reason != "no hooks" || !k.Groups[1].Entries[0].Expect.NotRun {
		t.Fatalf("parsed %+v", k)
	}
	if got := k.Format(); got != list {
		t.Fatalf("Format:\n%s\nwant:\n%s", got, list)
	}
}

func TestParseKnownRejectsBadLines(t *testing.T) {
	for _, tc := range []struct{ desc, text, want string }{
		{"spec before group", "# h\nspec | why | not run\n", "before the first"},
		{"no reason", "## g\nspec only\n", "want \"<spec name> | <reason> | <expectation>\""},
		{"no expectation", "## g\nspec | why\n", "want \"<spec name> | <reason> | <expectation>\""},
		{"empty reason", "## g\nspec |  | not run\n", "want"},
		{"expectation without pattern", "## g\nspec | why | failed\n", "the expectation"},
		{"expected to pass", "## g\nspec | why | passed: x\n", "cannot be expected to pass"},
		{"bad regexp", "## g\nspec | why | failed: (\n", "the expectation"},
		{"duplicate", "## g\ns | a | not run\n## h\ns | b | not run\n", "already listed on line 2"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := ParseKnown(tc.text)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseKnown = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	k, err := ParseKnown(list + "\n## Gated\n[sig-node] NodeLease x | should not be here | failed: .\n" +
		"\n## Skips\n[sig-node] Skips itself | needs subordinate IDs | skipped: subordinate IDs\n")
	if err != nil {
		t.Fatal(err)
	}
	timing := map[string]string{"[sig-node] Slow probe": "1 s timeouts"}
	expected := []string{"[sig-node] Probing container a", "[sig-node] Other"}
	for _, tc := range []struct {
		desc        string
		results     []Result
		partial     bool
		suiteExit   int
		regressions []string
		nowPassing  []string
		missing     []string
		retried     []string
		suite       bool
		known       int
	}{
		{desc: "listed specs fail as recorded", results: []Result{
			{Name: "[sig-node] Probing container a", State: "failed", Message: "x: no prober here"},
			{Name: "[sig-node] Probing container b", State: "timedout", Message: "late"},
			{Name: "[sig-node] Other", State: "passed"},
		}, suiteExit: 1, known: 2},
		{desc: "unlisted failure is a regression", results: []Result{
			{Name: "[sig-node] New", State: "failed"},
		}, partial: true, regressions: []string{"[sig-node] New"}},
		{desc: "unlisted skip is a regression", results: []Result{
			{Name: "[sig-node] New", State: "skipped", Message: "no"},
		}, partial: true, regressions: []string{"[sig-node] New"}},
		{desc: "a listed spec failing differently is a regression", results: []Result{
			{Name: "[sig-node] Probing container a", State: "failed", Message: "something else broke"},
			{Name: "[sig-node] Probing container b", State: "failed", Message: "late"},
			{Name: "[sig-node] Other", State: "passed"},
		}, regressions: []string{"[sig-node] Probing container a", "[sig-node] Probing container b"}},
		{desc: "a listed not-run spec that ran and failed is a regression", results: []Result{
			{Name: "[sig-node] Hook c", State: "failed", Message: "x"},
		}, partial: true, regressions: []string{"[sig-node] Hook c"}},
		{desc: "a listed spec that passes fails the run", results: []Result{
			{Name: "[sig-node] Probing container b", State: "passed"},
		}, partial: true, nowPassing: []string{"[sig-node] Probing container b"}},
		{desc: "must-pass specs gate even when listed", results: []Result{
			{Name: "[sig-node] NodeLease x", State: "failed"},
		}, partial: true, regressions: []string{"[sig-node] NodeLease x"}},
		{desc: "an expected spec that reported nothing fails the run", results: []Result{
			{Name: "[sig-node] Other", State: "passed"},
		}, missing: []string{"[sig-node] Probing container a"}},
		{desc: "a focus run does not require every expected spec", results: []Result{
			{Name: "[sig-node] Other", State: "passed"},
		}, partial: true},
		{desc: "a second attempt is allowed for a timing-sensitive spec and counted", results: []Result{
			{Name: "[sig-node] Slow probe", State: "passed", Attempts: 2},
		}, partial: true, retried: []string{"[sig-node] Slow probe"}},
		{desc: "a second attempt of any other spec is a regression", results: []Result{
			{Name: "[sig-node] Other", State: "passed", Attempts: 2},
		}, partial: true, regressions: []string{"[sig-node] Other"}},
		{desc: "a suite that failed while every spec passed fails the run", results: []Result{
			{Name: "[sig-node] Other", State: "passed"},
		}, partial: true, suiteExit: 1, suite: true},
		// A skip does not make ginkgo exit non-zero: a listed skip cannot
		// explain a failed suite (the userns set's one known skip).
		{desc: "a suite that failed while the only other spec skipped as listed fails the run", results: []Result{
			{Name: "[sig-node] Other", State: "passed"},
			{Name: "[sig-node] Skips itself", State: "skipped", Message: "no subordinate IDs for kubelet"},
		}, partial: true, suiteExit: 1, suite: true, known: 1},
		{desc: "a listed skip with the suite green passes", results: []Result{
			{Name: "[sig-node] Other", State: "passed"},
			{Name: "[sig-node] Skips itself", State: "skipped", Message: "no subordinate IDs for kubelet"},
		}, partial: true, known: 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			v := Judge(tc.results, Inputs{Known: k, Timing: timing, Expected: expected, Partial: tc.partial, SuiteExit: tc.suiteExit, MustPass: gate})
			var regs, retried []string
			for _, r := range v.Regressions {
				regs = append(regs, r.Name)
			}
			for _, r := range v.Retried {
				retried = append(retried, r.Name)
			}
			if !slices.Equal(regs, tc.regressions) || !slices.Equal(v.NowPassing, tc.nowPassing) || len(v.Known) != tc.known ||
				!slices.Equal(v.Missing, tc.missing) || !slices.Equal(retried, tc.retried) || (v.Suite != "") != tc.suite {
				t.Fatalf("regressions %q nowPassing %q missing %q retried %q suite %q known %d, want %q %q %q %q %v %d",
					regs, v.NowPassing, v.Missing, retried, v.Suite, len(v.Known), tc.regressions, tc.nowPassing, tc.missing, tc.retried, tc.suite, tc.known)
			}
			wantFail := len(tc.regressions)+len(tc.nowPassing)+len(tc.missing) > 0 || tc.suite
			if v.Failed() != wantFail {
				t.Fatalf("Failed() = %v, want %v", v.Failed(), wantFail)
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	k, _ := ParseKnown(list)
	next, unclassified := Update(k, []Result{
		{Name: "[sig-node] Probing container a", State: "passed"},          // leaves
		{Name: "[sig-node] Probing container b", State: "failed"},          // stays with its reason
		{Name: "[sig-node] Zeta", State: "failed", Message: "boom"},        // not filed
		{Name: "[sig-node] Alpha", State: "skipped", Message: "no | way"},  // not filed
		{Name: "[sig-node] NodeLease y", State: "failed", Message: "gate"}, // never listed
		{Name: "[sig-node] Fine", State: "passed"},
	}, gate)
	// "[sig-node] Hook c" did not run: it stays.
	want := `# header
# second line

## Probes
[sig-node] Probing container b | no prober | timedout: .

## Hooks
[sig-node] Hook c | no hooks | not run
`
	if got := next.Format(); got != want {
		t.Fatalf("Update:\n%s\nwant:\n%s", got, want)
	}
	var names []string
	for _, r := range unclassified {
		names = append(names, r.Name)
	}
	if !slices.Equal(names, []string{"[sig-node] Alpha", "[sig-node] Zeta"}) {
		t.Fatalf("unclassified %q, want Alpha and Zeta", names)
	}
}

func TestParseTiming(t *testing.T) {
	m, err := ParseTiming("# c\n\n[sig-node] a | 1 s probe timeouts\n")
	if err != nil || m["[sig-node] a"] != "1 s probe timeouts" {
		t.Fatalf("ParseTiming = %v, %v", m, err)
	}
	for _, bad := range []string{"[sig-node] a\n", "a | x\na | y\n"} {
		if _, err := ParseTiming(bad); err == nil {
			t.Errorf("ParseTiming(%q) succeeded", bad)
		}
	}
}

func TestExpectedRoundTrips(t *testing.T) {
	text := FormatExpected([]string{"# h"}, []string{"b", "a", "b"})
	if text != "# h\na\nb\n" {
		t.Fatalf("FormatExpected = %q", text)
	}
	if got := ParseExpected(text); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("ParseExpected = %q", got)
	}
}

func TestReplaceGenerated(t *testing.T) {
	beginMarker, endMarker := markers("known-failures")
	otherBegin, otherEnd := markers("known-failures-features")
	doc := "intro\n" + beginMarker + "\nold\n" + endMarker + "\nmiddle\n" + otherBegin + "\nother\n" + otherEnd + "\nafter\n"
	k, _ := ParseKnown(list)
	got, err := ReplaceGenerated(doc, "known-failures", k.Markdown("1 passed of 4 specs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"intro\n" + beginMarker + "\nLast regenerated", "### Probes (2)",
		"- `[sig-node] Hook c` — no hooks\n" + endMarker + "\nmiddle\n" + otherBegin + "\nother\n" + otherEnd + "\nafter\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("docs lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "old") {
		t.Errorf("the old section survived:\n%s", got)
	}
	// Another set's section, and only it.
	got, err = ReplaceGenerated(doc, "known-failures-features", "new\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "intro\n" + beginMarker + "\nold\n" + endMarker + "\nmiddle\n" + otherBegin + "\nnew\n" + otherEnd + "\nafter\n"; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := ReplaceGenerated("no markers", "known-failures", "x"); err == nil {
		t.Error("ReplaceGenerated without markers succeeded")
	}
}

func TestParseResults(t *testing.T) {
	rs, err := ParseResults(strings.NewReader(`{"name":"a","state":"passed","seconds":1.5,"attempts":2}` + "\n\n" + `{"name":"b","state":"failed","message":"x"}` + "\n"))
	if err != nil || len(rs) != 2 || rs[1].Message != "x" || rs[0].Seconds != 1.5 || rs[0].Attempts != 2 {
		t.Fatalf("ParseResults = %+v, %v", rs, err)
	}
	if _, err := ParseResults(strings.NewReader(`{"state":"passed"}`)); err == nil {
		t.Fatal("a result without a name parsed")
	}
}

func TestReadExpected(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "expected-specs.txt")
	if got, err := readExpected(missing, true); err != nil || got != nil {
		t.Errorf("missing file, may be missing: %q, %v; want none, no error", got, err)
	}
	if _, err := readExpected(missing, false); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file, required: %v; want ErrNotExist", err)
	}
	if err := os.WriteFile(missing, []byte("# header\na spec\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, may := range []bool{true, false} {
		if got, err := readExpected(missing, may); err != nil || !slices.Equal(got, []string{"a spec"}) {
			t.Errorf("file, mayBeMissing=%v: %q, %v; want [a spec]", may, got, err)
		}
	}
}

// A spec that passed only on its second attempt says why its first failed,
// whether the retry is allowed (timing-sensitive) or fails the run.
func TestPrintShowsEarlierAttempts(t *testing.T) {
	k, _ := ParseKnown(list)
	timing := map[string]string{"[sig-node] Slow probe": "late probe"}
	v := Judge([]Result{
		{Name: "[sig-node] Slow probe", State: "passed", Attempts: 2, Earlier: []string{"Failure recorded during attempt 1:\nprobe timed out\nat probe.go:10"}},
		{Name: "[sig-node] Other", State: "passed", Attempts: 2, Earlier: []string{"Failure recorded during attempt 1:\npod \"x\" failed with reason: \"\"\nat pod.go:20"}},
	}, Inputs{Known: k, Timing: timing, Partial: true})
	var b strings.Builder
	v.Print(&b)
	for _, want := range []string{"earlier attempt: Failure recorded during attempt 1:\n        probe timed out\n        at probe.go:10", `pod "x" failed with reason: ""`, "at pod.go:20"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}
