// Package conformance runs upstream Kubernetes e2e specs against a node run
// by nodeagent. The specs are not copied: the test imports
// k8s.io/kubernetes/test/e2e/common/node and test/e2e/node at the version
// pinned in this module, so what runs is exactly the upstream code.
//
// By default it runs the NodeLease specs of test/e2e/common/node/node_lease.go
// and the [NodeConformance] specs (all in test/e2e/common/node), without the
// [Serial], [Slow], [Disruptive], [Flaky] and [Feature:...] ones, plus, for
// each CSI driver described with --storage.testdriver=FILE
// (test/e2e/storage/external), the "External Storage [Driver: <name>]"
// specs of the storage test suites; --ginkgo.focus, --ginkgo.skip or
// --ginkgo.label-filter replace that selection (hack/conformance.sh's
// --set=features passes its own).
//
// Those specs pick a random Ready, schedulable, untainted node. When
// --nodeagent.node (or $NODEAGENT_CONFORMANCE_NODE) names the agent's node,
// every spec first waits until that node is the only such node in the
// cluster, and checks again right before the spec body runs, so a node of
// some other test can never be the one that was checked. The wait is bounded
// by --nodeagent.exclusive-timeout.
//
// With --nodeagent.results FILE the suite writes each spec's outcome there
// (one JSON object per line) when it ends; without it, it prints one line per
// spec. Both work in ginkgo's parallel mode, where the report is written by
// process 1 for all processes.
//
// hack/conformance.sh builds the e2e images, starts the agent, compiles and
// runs this test in parallel with the ginkgo CLI against the cluster given by
// $KUBECONFIG, compares the outcome with hack/conformance/known-failures.txt
// and cleans up; it is part of `make test`.
package conformance
