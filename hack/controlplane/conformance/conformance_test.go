package conformance

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/wait"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/test/e2e/framework"
	e2econfig "k8s.io/kubernetes/test/e2e/framework/config"
	e2enode "k8s.io/kubernetes/test/e2e/framework/node"

	// The upstream specs under test. Importing a package registers all of
	// its specs; the focus below (or hack/conformance.sh's) selects the ones
	// that run. test/e2e/node has no [NodeConformance] spec: its specs run
	// only when a run selects them (the pod generation specs,
	// hack/conformance.sh --set=features).
	_ "k8s.io/kubernetes/test/e2e/common/node"
	_ "k8s.io/kubernetes/test/e2e/node"
	// The storage test suites (test/e2e/storage/testsuites) for a CSI
	// driver described by a file: each --storage.testdriver=FILE registers
	// "External Storage [Driver: <name>] ..." specs, which the "node"
	// selection runs too (storageFocus).
	_ "k8s.io/kubernetes/test/e2e/storage/external"
)

// The selections a run may make (--nodeagent.set; hack/conformance.sh
// --set). Without --nodeagent.set and without a focus, skip or label
// filter of its own, a run makes the "node" selection.
//
// "node" (make test) is the NodeLease specs of
// test/e2e/common/node/node_lease.go and the [NodeConformance] specs of
// test/e2e/common/node, as
// the upstream node conformance jobs select them: without those that need
// a dedicated node or much time, those of features that are not generally
// available, and the one spec that needs the internet (it pulls agnhost
// from registry.k8s.io with imagePullPolicy Always, and fails here only
// after three 5-minute attempts; hack/conformance/known-failures.txt lists
// it); and a short form of the feature specs (featuresShort).
//
// "features" (make conformance-features) is the specs of the default-on
// pod features of 1.34 that e2e.test has and this node can run, but user
// namespaces: in-place resize (test/e2e/common/node/pod_resize.go and
// test/e2e/node's) and pod generation (observedGeneration). The [Serial]
// resize specs (they fill the node) and the alpha, off-by-default ones are
// left out.
//
// "userns" (make test and make conformance-features) is the user namespace
// specs; the node must run on a runtime that has them (hack/conformance.sh
// --set=userns starts containerd 2.x with runc 1.5, which is built without
// seccomp: the resize specs' pods, RuntimeDefault, cannot run there).
var (
	// No [NodeConformance] spec of v1.34.4 is also [Feature:...], so the
	// upstream jobs' skip of `\[Feature:` would change nothing, and it
	// would drop the short form's pod generation specs (named one by one).
	nodeSkip = []string{`\[Serial\]`, `\[Slow\]`, `\[Disruptive\]`, `\[Flaky\]`,
		`Container Runtime blackbox test when running a container with a new image should be able to pull image \[`,
		// test/e2e/node's imports register test/e2e/common/network's and
		// common/storage's specs too (79 of them [NodeConformance]); they
		// are not judged yet. (RE2 has no lookahead: every [sig-storage]
		// spec but the External Storage ones, "EmptyDir" included.)
		`\[sig-network\] `, `\[sig-storage\] ([^E]|E[^x])`,
		// Runs its script in the nginx image, which is not built here
		// (hack/conformance.sh); it would wait 5 minutes for the pull.
		`External Storage \[Driver: .*\] volumes should allow exec of files on the volume`,
		// Storage specs of features not generally available.
		`External Storage \[Driver: .*\[Feature:`}
	// storageFocus adds, to the "node" selection, the External Storage
	// specs of the drivers given with --storage.testdriver (none are
	// registered without one).
	storageFocus = `External Storage \[Driver: `
	usernsFocus  = `\[Feature:UserNamespacesSupport\]`
	featureSkip  = []string{`\[Serial\]`, `\[Feature:OffByDefault\]`}
	selections   = map[string]selection{
		"node": {focus: append([]string{`\[sig-node\] NodeLease`, `\[NodeConformance\]`}, quoted(featuresShort)...), skip: nodeSkip},
		"features": {focus: []string{`\[sig-node\] Pod InPlace Resize Container `, `\[sig-node\] Pods Extended \(pod generation\) `},
			skip: featureSkip},
		"userns": {focus: []string{usernsFocus}, skip: featureSkip},
	}
)

// featuresShort are the feature specs the "node" selection runs (each by
// its full name): what the "features" selection checks at length, in a
// few specs that fit beside the rest of make test.
var featuresShort = []string{
	"[sig-node] Pod InPlace Resize Container [FeatureGate:InPlacePodVerticalScaling] [Beta] Guaranteed QoS pod, one container - increase CPU & memory",
	"[sig-node] Pod InPlace Resize Container [FeatureGate:InPlacePodVerticalScaling] [Beta] Burstable QoS pod, one container - decrease CPU (NotRequired) & memory (RestartContainer)",
	"[sig-node] Pod InPlace Resize Container [FeatureGate:InPlacePodVerticalScaling] [Beta] decrease memory limit below usage",
	"[sig-node] Pod InPlace Resize Container [FeatureGate:InPlacePodVerticalScaling] [Beta] BestEffort pod - try requesting memory, expect error",
	"[sig-node] Pods Extended (pod generation) [Feature:PodObservedGenerationTracking] [FeatureGate:PodObservedGenerationTracking] [Beta] Pod Generation pod rejected by kubelet should have updated generation and observedGeneration",
	"[sig-node] Pods Extended (pod generation) [Feature:PodObservedGenerationTracking] [FeatureGate:PodObservedGenerationTracking] [Beta] Pod Generation pod observedGeneration field set in pod conditions",
}

type selection struct{ focus, skip []string }

// quoted matches each name (the end of a spec's text: ginkgo's has more
// before it).
func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = regexp.QuoteMeta(n) + "$"
	}
	return out
}

var (
	set              string
	nodeName         string
	running          bool
	exclusiveTimeout time.Duration
	resultsFile      string
)

func TestMain(m *testing.M) {
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.StringVar(&set, "nodeagent.set", "",
		"The specs to run: node, features or userns (see selections). Default: node, unless a focus, skip or label filter is given.")
	// --storage.testdriver and the other flags of e2e packages, as
	// test/e2e/e2e_test.go does.
	e2econfig.CopyFlags(e2econfig.Flags, flag.CommandLine)
	flag.StringVar(&nodeName, "nodeagent.node", os.Getenv("NODEAGENT_CONFORMANCE_NODE"),
		"The agent's node. If set, every spec waits until it is the only Ready, schedulable, untainted node, "+
			"because the upstream specs pick a random such node. Default $NODEAGENT_CONFORMANCE_NODE.")
	flag.StringVar(&resultsFile, "nodeagent.results", "",
		"Write one JSON object per spec that ran or was skipped while running (name, state, seconds, message) to this file "+
			"when the suite ends (in parallel mode: process 1, for all processes). hack/conformance/ratchet reads it.")
	flag.DurationVar(&exclusiveTimeout, "nodeagent.exclusive-timeout", 3*time.Minute,
		"How long a spec waits for the other nodes to become NotReady or disappear "+
			"(a killed agent's node turns NotReady about 40s after its last heartbeat).")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unexpected arguments: %q\n", flag.Args())
		os.Exit(2)
	}
	if framework.TestContext.KubeConfig == "" {
		fmt.Fprintln(os.Stderr, "no cluster: set KUBECONFIG or --kubeconfig to an admin kubeconfig (hack/conformance.sh does)")
		os.Exit(2)
	}
	if framework.TestContext.Provider == "" {
		// No cloud: nothing provider-specific is needed by these specs.
		framework.TestContext.Provider = "skeleton"
	}
	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

func TestConformance(t *testing.T) {
	gomega.RegisterFailHandler(framework.Fail)
	suiteConfig, reporterConfig := ginkgo.GinkgoConfiguration()
	own := len(suiteConfig.FocusStrings) > 0 || len(suiteConfig.SkipStrings) > 0 || suiteConfig.LabelFilter != ""
	switch {
	case set != "" && own:
		t.Fatalf("--nodeagent.set=%s and a focus, skip or label filter of its own: give one or the other", set)
	case set == "" && !own:
		set = "node"
	}
	if set != "" {
		sel, ok := selections[set]
		if !ok {
			t.Fatalf("--nodeagent.set=%q: want node, features or userns", set)
		}
		suiteConfig.FocusStrings, suiteConfig.SkipStrings = sel.focus, sel.skip
		if set == "node" && storageDrivers() {
			suiteConfig.FocusStrings = append(slices.Clone(suiteConfig.FocusStrings), storageFocus)
		}
	}
	running = true
	ginkgo.RunSpecs(t, "nodeagent: upstream node conformance", suiteConfig, reporterConfig)
}

// storageDrivers reports whether --storage.testdriver was given.
func storageDrivers() bool {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "storage.testdriver" })
	return given
}

// The upstream specs pick their node in a BeforeEach registered right after
// framework.NewDefaultFramework. Framework extensions run inside
// NewDefaultFramework, so a BeforeEach they register runs after the
// framework's own setup and before the pick, and a JustBeforeEach runs after
// the pick, right before the spec body. (A top-level BeforeEach would be lost:
// Ginkgo drops top-level setup nodes when the framework previews the specs.)
func init() {
	framework.NewFrameworkExtensions = append(framework.NewFrameworkExtensions, func(f *framework.Framework) {
		ginkgo.BeforeEach(waitUntilOnlyNode)
		ginkgo.JustBeforeEach(checkOnlyNode)
	})
}

// waitUntilOnlyNode waits until the agent's node is the only node upstream's
// e2enode.GetRandomReadySchedulableNode can pick.
func waitUntilOnlyNode(ctx context.Context) {
	if nodeName == "" {
		return
	}
	c := adminClient()
	var others []string
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, exclusiveTimeout, true, func(ctx context.Context) (bool, error) {
		names, err := readySchedulableNodes(ctx, c)
		if err != nil {
			framework.Logf("listing nodes: %v", err)
			return false, nil
		}
		found := slices.Contains(names, nodeName)
		rest := slices.DeleteFunc(names, func(n string) bool { return n == nodeName })
		if len(rest) > 0 && !slices.Equal(rest, others) {
			framework.Logf("waiting for other Ready schedulable nodes to become NotReady or go away (the spec could pick one of them instead of %s): %s",
				nodeName, strings.Join(rest, ", "))
		}
		others = rest
		return found && len(rest) == 0, nil
	})
	if err != nil {
		framework.Failf("node %s is not the only Ready, schedulable, untainted node after %v (others: %v), and the spec picks a random one: %v",
			nodeName, exclusiveTimeout, others, err)
	}
	framework.Logf("node %s is the only Ready, schedulable, untainted node", nodeName)
}

// checkOnlyNode fails the spec if another node could have been picked after
// waitUntilOnlyNode returned.
func checkOnlyNode(ctx context.Context) {
	if nodeName == "" {
		return
	}
	names, err := readySchedulableNodes(ctx, adminClient())
	framework.ExpectNoError(err, "listing nodes")
	if !slices.Equal(names, []string{nodeName}) {
		framework.Failf("Ready, schedulable, untainted nodes changed while the spec picked its node: %v, want only %s", names, nodeName)
	}
}

// Result is one spec's outcome as written to --nodeagent.results, one JSON
// object per line. hack/conformance/ratchet reads the same fields.
type Result struct {
	Name     string  `json:"name"`
	State    string  `json:"state"` // ginkgo's: passed, failed, skipped, panicked, timedout, ...
	Seconds  float64 `json:"seconds"`
	Attempts int     `json:"attempts,omitempty"` // ginkgo's NumAttempts (--flake-attempts); the ratchet counts retries
	Message  string  `json:"message,omitempty"`  // the failure or skip message
	Location string  `json:"location,omitempty"` // where it failed
	// Earlier holds the failures of the attempts before the last (ginkgo's
	// AdditionalFailures under --flake-attempts), each with where it
	// failed: a spec that passed on its second attempt still says why its
	// first one failed.
	Earlier []string `json:"earlier,omitempty"`
}

// results returns the outcome of every spec that ran. Specs the focus left
// out are "skipped" too, but without a message: they are not results.
func results(report types.Report) []Result {
	var out []Result
	for _, s := range report.SpecReports {
		if s.LeafNodeType != types.NodeTypeIt {
			continue
		}
		if s.State == types.SpecStateSkipped && s.Failure.Message == "" {
			continue
		}
		r := Result{Name: s.FullText(), State: s.State.String(), Seconds: s.RunTime.Seconds(), Attempts: s.NumAttempts, Message: strings.TrimSpace(s.Failure.Message)}
		if s.State != types.SpecStatePassed && s.State != types.SpecStateSkipped {
			r.Location = s.Failure.Location.String()
		}
		for _, af := range s.AdditionalFailures {
			r.Earlier = append(r.Earlier, strings.TrimSpace(af.Failure.Message)+"\nat "+af.Failure.Location.String())
		}
		out = append(out, r)
	}
	return out
}

// One line per spec, so the output shows every result at a glance even
// when the log of a spec is long; in parallel mode this runs on process 1
// with every process's specs, and the ginkgo CLI may hold its output back,
// so hack/conformance.sh prints the results file instead.
var _ = ginkgo.ReportAfterSuite("nodeagent results", func(report types.Report) {
	if !running {
		return // framework.AfterReadingAllFlags previews the specs; nothing ran.
	}
	rs := results(report)
	if resultsFile != "" {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		for _, r := range rs {
			_ = enc.Encode(r) // a struct of strings and a float cannot fail
		}
		if err := os.WriteFile(resultsFile, []byte(b.String()), 0o644); err != nil {
			framework.Failf("writing the results: %v", err)
		}
		return
	}
	fmt.Println()
	fmt.Println("nodeagent conformance results:")
	for _, r := range rs {
		fmt.Printf("  %-8s %6.1fs  %s\n", strings.ToUpper(r.State), r.Seconds, r.Name)
		if r.Message != "" {
			fmt.Printf("           %s\n", strings.ReplaceAll(r.Message, "\n", "\n           "))
		}
	}
})

// readySchedulableNodes returns, sorted, the nodes upstream's
// e2enode.GetRandomReadySchedulableNode would choose from.
func readySchedulableNodes(ctx context.Context, c clientset.Interface) ([]string, error) {
	// It fails when there is no such node at all; callers retry.
	list, err := e2enode.GetReadySchedulableNodes(ctx, c)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list.Items))
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	return names, nil
}

func adminClient() clientset.Interface {
	cfg, err := framework.LoadConfig()
	framework.ExpectNoError(err, "loading the kubeconfig")
	c, err := clientset.NewForConfig(cfg)
	framework.ExpectNoError(err, "creating a client")
	return c
}
