// Package conformance runs upstream Kubernetes e2e specs against a node run
// by nodeagent. The specs are not copied: the test imports
// k8s.io/kubernetes/test/e2e/common/node at the version pinned in this
// module, so what runs is exactly the upstream code.
//
// Only the NodeLease specs of test/e2e/common/node/node_lease.go run by
// default (creates and updates a lease, OwnerReferences set, reports node
// status infrequently); --ginkgo.focus overrides that.
//
// Those specs pick a random Ready, schedulable, untainted node. When
// --nodeagent.node (or $NODEAGENT_CONFORMANCE_NODE) names the agent's node,
// every spec first waits until that node is the only such node in the
// cluster, and checks again right before the spec body runs, so a node of
// some other test can never be the one that was checked. The wait is bounded
// by --nodeagent.exclusive-timeout.
//
// hack/conformance.sh starts the agent, compiles and runs this test against
// the cluster given by $KUBECONFIG and cleans up; it is part of `make test`.
package conformance
