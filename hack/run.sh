#!/usr/bin/env bash
# make run: the local control plane + containerd, and the agent in the
# foreground with its logs. Once the node is Ready it shows `kubectl get
# nodes` and the Lease. Ctrl-C stops the agent and the cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dir=$root/_output/local
node=${NODE_NAME:-$(hostname | tr '[:upper:]' '[:lower:]')}

hack/localcluster.sh up >/dev/null
eval "$(_output/bin/localcluster env)"
kubeconfig=$(_output/bin/localcluster node-kubeconfig "$node")
cleanup() {
  set +e
  trap - EXIT INT TERM
  if [ -n "${agent_pid:-}" ]; then kill -TERM "$agent_pid" 2>/dev/null; wait "$agent_pid" 2>/dev/null; fi
  [ -n "${show_pid:-}" ] && kill "$show_pid" 2>/dev/null
  echo "run: stopping the local cluster" >&2
  _output/bin/localcluster down
  exit 0
}
trap cleanup EXIT INT TERM

mkdir -p "$dir/agent"
cat > "$dir/agent/config.yaml" <<CFG
apiVersion: config.nodeagent.io/v1alpha1
kind: NodeAgentConfiguration
containerRuntimeEndpoint: unix://$NODEAGENT_CONTAINERD_ADDRESS
rootDir: $dir/agent/root
staticPodPath: $dir/agent/manifests
CFG
mkdir -p "$dir/agent/manifests"
cat >&2 <<MSG
run: control plane at $NODEAGENT_APISERVER_URL, containerd at $NODEAGENT_CONTAINERD_ADDRESS
run: admin kubeconfig:  export KUBECONFIG=$KUBECONFIG
run: node kubeconfig:   $kubeconfig
run: agent config:      $dir/agent/config.yaml   logs of the control plane: $dir/logs/
run: starting nodeagent as node "$node" (Ctrl-C stops everything)
MSG

# Show the node and its Lease once Ready, in the background.
(
  until _output/bin/kubectl wait --for=condition=Ready "node/$node" --timeout=5s >/dev/null 2>&1; do sleep 1; done
  echo; _output/bin/kubectl get nodes -o wide; echo
  _output/bin/kubectl -n kube-node-lease get lease "$node" -o yaml | sed -n '/^metadata:/,$p'; echo
) >&2 &
show_pid=$!

_output/bin/nodeagent --config "$dir/agent/config.yaml" --kubeconfig "$kubeconfig" --hostname-override "$node" &
agent_pid=$!
wait "$agent_pid" || true
agent_pid=
