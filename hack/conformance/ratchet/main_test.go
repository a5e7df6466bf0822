package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

const list = `# header
# second line

## Probes
[sig-node] Probing container a | no prober
[sig-node] Probing container b | no prober

## Hooks
[sig-node] Hook c | no hooks
`

var gate = regexp.MustCompile(`^\[sig-node\] NodeLease `)

func TestParseKnownRoundTrips(t *testing.T) {
	k, err := ParseKnown(list)
	if err != nil {
		t.Fatal(err)
	}
	if k.Len() != 3 || len(k.Groups) != 2 || k.Groups[1].Entries[0].Reason != "no hooks" {
		t.Fatalf("parsed %+v", k)
	}
	if got := k.Format(); got != list {
		t.Fatalf("Format:\n%s\nwant:\n%s", got, list)
	}
}

func TestParseKnownRejectsBadLines(t *testing.T) {
	for _, tc := range []struct{ desc, text, want string }{
		{"spec before group", "# h\nspec | why\n", "before the first"},
		{"no reason", "## g\nspec only\n", "want \"<spec name> | <reason>\""},
		{"empty reason", "## g\nspec | \n", "want"},
		{"duplicate", "## g\ns | a\n## h\ns | b\n", "already listed on line 2"},
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
	k, _ := ParseKnown(list + "\n## Gated\n[sig-node] NodeLease x | should not be here\n")
	for _, tc := range []struct {
		desc        string
		results     []Result
		regressions []string
		nowPassing  []string
		known       int
	}{
		{desc: "all listed fail", results: []Result{
			{Name: "[sig-node] Probing container a", State: "failed"},
			{Name: "[sig-node] Hook c", State: "timedout"},
			{Name: "[sig-node] Other", State: "passed"},
		}, known: 2},
		{desc: "unlisted failure is a regression", results: []Result{
			{Name: "[sig-node] New", State: "failed"},
		}, regressions: []string{"[sig-node] New"}},
		{desc: "unlisted skip is a regression", results: []Result{
			{Name: "[sig-node] New", State: "skipped", Message: "no"},
		}, regressions: []string{"[sig-node] New"}},
		{desc: "listed pass is reported", results: []Result{
			{Name: "[sig-node] Probing container b", State: "passed"},
		}, nowPassing: []string{"[sig-node] Probing container b"}},
		{desc: "must-pass specs gate even when listed", results: []Result{
			{Name: "[sig-node] NodeLease x", State: "failed"},
		}, regressions: []string{"[sig-node] NodeLease x"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			v := Judge(tc.results, k, gate)
			var regs []string
			for _, r := range v.Regressions {
				regs = append(regs, r.Name)
			}
			if !slices.Equal(regs, tc.regressions) || !slices.Equal(v.NowPassing, tc.nowPassing) || len(v.Known) != tc.known {
				t.Fatalf("regressions %q nowPassing %q known %d, want %q %q %d", regs, v.NowPassing, len(v.Known), tc.regressions, tc.nowPassing, tc.known)
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	k, _ := ParseKnown(list)
	next := Update(k, []Result{
		{Name: "[sig-node] Probing container a", State: "passed"},                                              // leaves
		{Name: "[sig-node] Probing container b", State: "failed"},                                              // stays with its reason
		{Name: "[sig-node] Zeta", State: "failed", Message: "boom\nmore\nstatus:\n  message: 'rejected: x'\n"}, // added
		{Name: "[sig-node] Alpha", State: "skipped", Message: "no | way"},                                      // added
		{Name: "[sig-node] NodeLease y", State: "failed", Message: "gate"},                                     // never listed
		{Name: "[sig-node] Fine", State: "passed"},
	}, gate)
	// "[sig-node] Hook c" did not run: it stays.
	want := `# header
# second line

## Probes
[sig-node] Probing container b | no prober

## Hooks
[sig-node] Hook c | no hooks

## Not classified yet
[sig-node] Alpha | skipped: no / way
[sig-node] Zeta | failed: boom more (pod status message: rejected: x)
`
	if got := next.Format(); got != want {
		t.Fatalf("Update:\n%s\nwant:\n%s", got, want)
	}
	if _, err := ParseKnown(next.Format()); err != nil {
		t.Fatalf("the updated list does not parse: %v", err)
	}
}

func TestReplaceGenerated(t *testing.T) {
	doc := "intro\n" + beginMarker + "\nold\n" + endMarker + "\nafter\n"
	k, _ := ParseKnown(list)
	got, err := ReplaceGenerated(doc, k.Markdown("1 passed of 4 specs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"intro\n" + beginMarker + "\nLast regenerated", "### Probes (2)", "- `[sig-node] Hook c` — no hooks\n" + endMarker + "\nafter\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("docs lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "old") {
		t.Errorf("the old section survived:\n%s", got)
	}
	if _, err := ReplaceGenerated("no markers", "x"); err == nil {
		t.Error("ReplaceGenerated without markers succeeded")
	}
}

func TestParseResults(t *testing.T) {
	rs, err := ParseResults(strings.NewReader(`{"name":"a","state":"passed","seconds":1.5}` + "\n\n" + `{"name":"b","state":"failed","message":"x"}` + "\n"))
	if err != nil || len(rs) != 2 || rs[1].Message != "x" || rs[0].Seconds != 1.5 {
		t.Fatalf("ParseResults = %+v, %v", rs, err)
	}
	if _, err := ParseResults(strings.NewReader(`{"state":"passed"}`)); err == nil {
		t.Fatal("a result without a name parsed")
	}
}
