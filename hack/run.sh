#!/usr/bin/env bash
# make run: the local control plane + containerd, and the agent in the
# foreground with its logs. Before the agent starts, the busybox test image
# is imported into the agent's containerd namespace and a sample static pod
# manifest is put in its manifest directory. Once the node is Ready it shows
# `kubectl get nodes`, the Lease, the pods, and how to run a pod. Ctrl-C
# stops the agent and the cluster, and removes what the pods left on the
# host (containers, network namespaces, tmpfs mounts, cgroups).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dir=$root/_output/local
agentroot=$dir/agent/root
manifests=$dir/agent/manifests
# internal/testing/testimage's reference.
image=docker.io/nodeagent/busybox:test
node=${NODE_NAME:-$(hostname | tr '[:upper:]' '[:lower:]')}

# cleanup_pods removes what the pods of a previous or this run left on the
# host once their containers are gone (localcluster down kills the shims):
# the network namespace mounts (/run/nodeagent/netns/<uid>), the pods'
# cgroups (kubepods/[<qos>/]pod<uid>, or /nodeagent/<uid> of older agents) and the tmpfs of Memory emptyDirs (and
# the rootDir's own bind mount). Only pods
# with a directory under this run's rootDir are touched: other agents on
# the machine (tests) keep theirs. Logs stay until the next run.
cleanup_pods() {
  [ -d "$agentroot/pods" ] || return 0
  local p uid cg
  for p in "$agentroot"/pods/*/; do
    [ -d "$p" ] || continue
    uid=$(basename "$p")
    if mountpoint -q "/run/nodeagent/netns/$uid" 2>/dev/null; then umount "/run/nodeagent/netns/$uid" || true; fi
    rm -f "/run/nodeagent/netns/$uid"
    for cg in /sys/fs/cgroup/*/nodeagent/"$uid" /sys/fs/cgroup/nodeagent/"$uid" \
      /sys/fs/cgroup/*/kubepods/pod"$uid" /sys/fs/cgroup/*/kubepods/*/pod"$uid" \
      /sys/fs/cgroup/kubepods/pod"$uid" /sys/fs/cgroup/kubepods/*/pod"$uid"; do
      if [ -d "$cg" ]; then find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
    done
  done
  # With the rootDir itself: the agent makes it a shared bind mount on a
  # host whose / is not shared (as kubelet does).
  findmnt -rn -o TARGET | grep -E "^$agentroot(/|\$)" | sort -r | xargs -r umount -l || true
}

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
  cleanup_pods
  ip link del nabr-run 2>/dev/null
  exit 0
}
trap cleanup EXIT INT TERM

# The cluster's etcd and containerd start empty: whatever a previous run's
# pods left is stale.
cleanup_pods
rm -rf "$agentroot" "$dir/agent/log"
mkdir -p "$dir/agent" "$manifests"
cat > "$dir/agent/config.yaml" <<CFG
apiVersion: config.nodeagent.io/v1alpha1
kind: NodeAgentConfiguration
containerRuntimeEndpoint: unix://$NODEAGENT_CONTAINERD_ADDRESS
rootDir: $agentroot
# Container logs as kubelet lays them out, here instead of the host's
# /var/log/pods and /var/log/containers.
podLogsDir: $dir/agent/log/pods
containerLogsDir: $dir/agent/log/containers
staticPodPath: $manifests
cniConfDir: $dir/agent/net.d
# The test image is imported (nothing can be pulled): never collect it.
imageGCHighThresholdPercent: 100
# kubectl logs: the API server's kubelet client certificate is signed by the
# cluster's CA.
authentication:
  x509:
    clientCAFile: $NODEAGENT_CLUSTER_DIR/pki/ca.crt
CFG

# The test image, in the namespace the agent uses (its default,
# containerRuntimeNamespace), so that pods start without a registry.
ns=$(_output/bin/nodeagent config effective --config "$dir/agent/config.yaml" | sed -n 's/^containerRuntimeNamespace: *//p')
go build -o _output/bin/importimage ./hack/importimage
_output/bin/importimage --address "$NODEAGENT_CONTAINERD_ADDRESS" --namespace "${ns:-k8s.io}" >/dev/null

# A static pod: its mirror pod shows in `kubectl get pods -A` as hello-<node>.
cat > "$manifests/hello.yaml" <<'POD'
apiVersion: v1
kind: Pod
metadata:
  name: hello
  namespace: default
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: hello
    image: docker.io/nodeagent/busybox:test
    command: ["sh", "-c", "trap 'exit 0' TERM; echo hello from $(POD_NAME) on $(NODE_NAME); while true; do date; sleep 60 & wait $!; done"]
    env:
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    - name: NODE_NAME
      valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
POD

cat >&2 <<MSG
run: control plane at $NODEAGENT_APISERVER_URL, containerd at $NODEAGENT_CONTAINERD_ADDRESS
run: admin kubeconfig:  export KUBECONFIG=$KUBECONFIG
run: node kubeconfig:   $kubeconfig
run: agent config:      $dir/agent/config.yaml   logs of the control plane: $dir/logs/
run: static pods:       $manifests/ (hello.yaml)   image $image in containerd namespace ${ns:-k8s.io}
run: starting nodeagent as node "$node" (Ctrl-C stops everything)
MSG

# The pod network, as a CNI DaemonSet would install it: once the controller
# manager gave the node its pod CIDR, a bridge + host-local + portmap
# network over it (Debian's plugins in /usr/lib/cni). Until then the node
# is NotReady with kubelet's NetworkPluginNotReady message (docs/networking.md).
rm -rf "$dir/agent/net.d"
(
  cidr=
  for _ in $(seq 120); do
    cidr=$(_output/bin/kubectl get node "$node" -o jsonpath='{.spec.podCIDR}' 2>/dev/null) && [ -n "$cidr" ] && break
    sleep 1
  done
  [ -n "$cidr" ] || { echo "run: the node got no pod CIDR; no pod network" >&2; exit 0; }
  mkdir -p "$dir/agent/net.d"
  cat > "$dir/agent/net.d/10-bridge.tmp" <<NET
{"cniVersion": "1.0.0", "name": "nodeagent-run", "plugins": [
  {"type": "bridge", "bridge": "nabr-run", "isGateway": true, "ipMasq": true, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$cidr"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true}
]}
NET
  mv "$dir/agent/net.d/10-bridge.tmp" "$dir/agent/net.d/10-bridge.conflist"
  echo "run: pod network $cidr installed in $dir/agent/net.d" >&2
) &

# Show the node, its Lease and the pods once Ready, in the background.
(
  until _output/bin/kubectl wait --for=condition=Ready "node/$node" --timeout=5s >/dev/null 2>&1; do sleep 1; done
  echo; _output/bin/kubectl get nodes -o wide; echo
  _output/bin/kubectl -n kube-node-lease get lease "$node" -o yaml | sed -n '/^metadata:/,$p'; echo
  for _ in $(seq 30); do
    _output/bin/kubectl get pod "hello-$node" >/dev/null 2>&1 && break
    sleep 1
  done
  _output/bin/kubectl get pods -A -o wide; echo
  cat <<HINT
run: the node runs pods (docs/pods.md). In another terminal:
  export KUBECONFIG=$KUBECONFIG PATH=$root/_output/bin:\$PATH
  kubectl run demo --image=$image -- sleep 3600
  kubectl get pods -A -o wide
  ls $dir/agent/log/pods/ $dir/agent/log/containers/  # container logs (kubelet's /var/log/pods and /var/log/containers layout)
  # edit or remove $manifests/hello.yaml to change or stop the static pod

HINT
) >&2 &
show_pid=$!

_output/bin/nodeagent --config "$dir/agent/config.yaml" --kubeconfig "$kubeconfig" --hostname-override "$node" &
agent_pid=$!
wait "$agent_pid" || true
agent_pid=
