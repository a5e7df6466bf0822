#!/usr/bin/env bash
# Runs the upstream Kubernetes e2e NodeLease specs
# (k8s.io/kubernetes/test/e2e/common/node/node_lease.go, compiled in from the
# pin in hack/controlplane/go.mod; see hack/controlplane/conformance) against
# a node run by nodeagent:
#   1. compiles the suite, or reuses a binary cached outside the work tree,
#      keyed by hack/controlplane/go.mod+go.sum, the suite's sources and the
#      Go version (a fresh clone on this machine only copies it);
#   2. starts one agent with node credentials as conformance-<random> and
#      waits until its node is Ready;
#   3. runs the NodeLease specs; each waits until that node is the only Ready
#      schedulable node, since the specs pick a random one;
#   4. stops the agent (SIGTERM), deletes its Node and Lease.
# Needs a running local cluster: NODEAGENT_CLUSTER_DIR (hack/localcluster.sh
# up; `make test` provides one) and _output/bin/nodeagent (make build).
# Extra arguments go to the suite, e.g. --ginkgo.focus='OwnerReferences'.
# The "report node status infrequently" spec alone takes 80-120s.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
log() { echo "conformance: $*" >&2; }
die() { log "$*"; exit 1; }
now() { date +%s; }

[ -n "${NODEAGENT_CLUSTER_DIR:-}" ] ||
  die "NODEAGENT_CLUSTER_DIR is not set: start a cluster with 'hack/localcluster.sh up' and 'eval \"\$(_output/bin/localcluster env)\"'"
agent=${NODEAGENT_BIN:-$root/_output/bin/nodeagent}
[ -x "$agent" ] || die "$agent is missing: run 'make build'"
lc=$root/_output/bin/localcluster
if [ ! -x "$lc" ]; then
  go build -o "$lc" ./hack/localcluster
fi
"$lc" status --dir "$NODEAGENT_CLUSTER_DIR" >/dev/null ||
  die "no cluster is running in $NODEAGENT_CLUSTER_DIR: start one with 'hack/localcluster.sh up --dir $NODEAGENT_CLUSTER_DIR'"
eval "$("$lc" env --dir "$NODEAGENT_CLUSTER_DIR")"
kubectl() { "$root/_output/bin/kubectl" --kubeconfig "$KUBECONFIG" "$@"; }

# 1. The suite binary.
key=$( (cat hack/controlplane/go.mod hack/controlplane/go.sum
        find hack/controlplane/conformance -type f -name '*.go' | LC_ALL=C sort | xargs cat
        go version) | sha256sum | cut -c1-16)
cache=${NODEAGENT_CACHE_DIR:-/var/cache/nodeagent-dev}/conformance/$key
suite=$cache/conformance.test
if [ -x "$suite" ]; then
  log "suite binary cached: $suite"
else
  log "compiling the upstream NodeLease suite (k8s.io/kubernetes test/e2e; cold about 2-10 minutes on 2 cores, cached afterwards in $cache)"
  s=$(now)
  mkdir -p "$cache"
  # -trimpath like hack/build-controlplane.sh, so packages it already compiled
  # come from the Go build cache.
  (cd hack/controlplane && go test -c -trimpath -vet=off -o "$suite.tmp.$$" ./conformance)
  mv -f "$suite.tmp.$$" "$suite"
  log "compiled in $(( $(now) - s ))s"
fi

# 2. The agent.
node=conformance-$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')
work=$(mktemp -d /tmp/na-conformance.XXXXXX)
pid=
cleanup() {
  local rc=$?
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      log "agent did not exit within 5s of SIGTERM; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  fi
  kubectl delete node "$node" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  kubectl -n kube-node-lease delete lease "$node" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  if [ "$rc" != 0 ] && [ -s "$work/agent.log" ]; then
    mkdir -p "$root/_output/conformance"
    cp "$work/agent.log" "$root/_output/conformance/$node.log"
    log "agent log: _output/conformance/$node.log; last lines:"
    tail -n 30 "$work/agent.log" >&2
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cat >"$work/config.yaml" <<EOF
apiVersion: config.nodeagent.io/v1alpha1
kind: NodeAgentConfiguration
containerRuntimeEndpoint: unix://$NODEAGENT_CONTAINERD_ADDRESS
rootDir: $work/root
healthzPort: 0
# No CNI network here: pod networking off, so Ready does not wait for one.
cniConfDir: ""
EOF
nodekc=$("$lc" node-kubeconfig "$node" --dir "$NODEAGENT_CLUSTER_DIR")
log "starting nodeagent as node $node (log: $work/agent.log)"
s=$(now)
"$agent" --config "$work/config.yaml" --kubeconfig "$nodekc" --hostname-override "$node" >"$work/agent.log" 2>&1 &
pid=$!
deadline=$(( $(now) + 60 ))
until [ "$(kubectl get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; do
  kill -0 "$pid" 2>/dev/null || die "nodeagent exited before its node became Ready"
  [ "$(now)" -lt "$deadline" ] || die "node $node is not Ready 60s after the agent started"
  sleep 0.5
done
log "node $node Ready $(( $(now) - s ))s after start"
# "should have OwnerReferences set" checks every Lease at once. The agent may
# create its Lease before the Node exists and add the owner at the next
# renewal (as the upstream lease controller does), so wait for the owner.
until [ "$(kubectl -n kube-node-lease get lease "$node" -o jsonpath='{.metadata.ownerReferences[0].kind}' 2>/dev/null)" = Node ]; do
  kill -0 "$pid" 2>/dev/null || die "nodeagent exited before its Lease had an owner"
  [ "$(now)" -lt "$deadline" ] || die "Lease kube-node-lease/$node has no Node owner 60s after the agent started"
  sleep 0.5
done
log "Lease kube-node-lease/$node owned by its Node $(( $(now) - s ))s after start"

# 3. The specs.
s=$(now)
rc=0
"$suite" --kubeconfig "$KUBECONFIG" --nodeagent.node "$node" \
  --ginkgo.v --ginkgo.no-color --ginkgo.timeout=20m "$@" || rc=$?
log "suite ran in $(( $(now) - s ))s, exit status $rc"
kill -0 "$pid" 2>/dev/null || { log "nodeagent exited during the run"; rc=1; }
exit "$rc"
