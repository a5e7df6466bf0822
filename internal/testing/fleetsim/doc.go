// Package fleetsim runs simulated nodes against a real control plane for the
// benchmarks in hack/bench/nodestatus and hack/fleet: each simulated node is
// the agent's own heartbeat.Controller and nodestatus.Manager, with its own
// node credentials (system:node:<name>), its own API clients and
// connections, wired as cmd/nodeagent wires them, over a simulated host and
// a stand-in container runtime that reports a fixed image list.
//
// It also holds what the benchmarks measure with: etcd's and the API
// server's metrics, the control plane processes' CPU time and RSS from
// /proc, the encoded sizes of a Node and its Lease, and the pure accounting
// of renewals (late, missed, expired), percentiles and per-node-hour rates.
//
// It is benchmark code: it is never linked into the agent.
package fleetsim
