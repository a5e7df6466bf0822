// Package testing is the root of the test harness: packages used only by
// tests, benchmarks and hack/ tools, never by the agent.
//
//   - testenv: the per-test environment (local control plane, containerd,
//     CNI configuration, host cleanup);
//   - localcluster: etcd, kube-apiserver and kube-controller-manager on
//     loopback (hack/localcluster is its command);
//   - testimage: the busybox test image and its local registry;
//   - faultproxy: a loopback TCP proxy that injects connection faults;
//   - fleetsim: the fleet simulator's nodes (the agent's own heartbeat and
//     node status, without containers);
//   - backofftest: helpers that drive a fake clock through back-offs;
//   - faketoken: TokenRequests answered on a fake clientset, as the API
//     server answers them;
//   - testlog: a *slog.Logger writing to t.Log.
//
// The harness may import the product; no product package may import the
// harness outside its tests (cmd/nodeagent's TestProductDoesNotImportTestHarness
// and TestDependencies guard it).
package testing
