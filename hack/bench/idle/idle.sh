#!/usr/bin/env bash
# Idle cost of one agent with the heartbeat running: RSS and CPU over a window.
#   hack/bench/idle/idle.sh [SECONDS] [MODE]
# MODE: "full" (default: heartbeat, node status, containerd + PLEG) or
# "heartbeat-only" (containerd absent: heartbeat and node status, no PLEG) as a baseline.
# Needs a running local cluster (hack/localcluster.sh up, or NODEAGENT_CLUSTER_DIR).
set -euo pipefail
cd "$(dirname "$0")/../../.."
secs=${1:-300}
mode=${2:-full}
make -s build
eval "$(_output/bin/localcluster env)"
node=bench-idle-$mode-$$
kc=$(_output/bin/localcluster node-kubeconfig "$node")
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; _output/bin/kubectl delete node "$node" --wait=false >/dev/null 2>&1; rm -rf "$work"' EXIT
{
  echo "apiVersion: config.nodeagent.io/v1alpha1"
  echo "kind: NodeAgentConfiguration"
  echo "rootDir: $work/root"
  echo "healthzPort: 0"
  echo "cniConfDir: \"\"" # no pod network: Ready does not wait for one
  if [ "$mode" = full ]; then echo "containerRuntimeEndpoint: unix://$NODEAGENT_CONTAINERD_ADDRESS"; else echo "containerRuntimeEndpoint: unix://$work/absent.sock"; fi
} > "$work/config.yaml"
_output/bin/nodeagent --config "$work/config.yaml" --kubeconfig "$kc" --hostname-override "$node" 2>"$work/log" &
pid=$!
for _ in $(seq 600); do
  # Registered and heartbeating (Ready only in full mode: without containerd the node is NotReady).
  _output/bin/kubectl get "node/$node" >/dev/null 2>&1 && _output/bin/kubectl -n kube-node-lease get lease "$node" >/dev/null 2>&1 && break
  kill -0 $pid 2>/dev/null || { echo "idle: the agent exited:"; cat "$work/log"; exit 1; }
  sleep 0.1
done
sleep 20 # past start-up
tck=$(getconf CLK_TCK)
cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
c0=$(cpu); t0=$(date +%s.%N); maxrss=0; sum=0; n=0
end=$(( $(date +%s) + secs ))
while [ "$(date +%s)" -lt "$end" ]; do
  rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
  sum=$((sum + rss)); n=$((n + 1)); [ "$rss" -gt "$maxrss" ] && maxrss=$rss
  sleep 5
done
c1=$(cpu); t1=$(date +%s.%N)
# Where the RSS is: the agent's own (anonymous) memory versus clean pages of
# the executable and other files it has touched.
anon=$(awk '/^Anonymous:/ {print $2}' /proc/$pid/smaps_rollup)
file=$(awk '/^Rss:/ {r=$2} /^Anonymous:/ {a=$2} END {print r-a}' /proc/$pid/smaps_rollup)
awk -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v tck="$tck" -v sum="$sum" -v n="$n" -v max="$maxrss" -v mode="$mode" -v secs="$secs" -v anon="$anon" -v file="$file" 'BEGIN {
  cpu = (c1 - c0) / tck; wall = t1 - t0
  printf "mode=%s window=%ds cpu_seconds=%.2f cpu_percent_of_one_core=%.3f rss_avg_MiB=%.1f rss_max_MiB=%.1f rss_anonymous_MiB=%.1f rss_file_backed_MiB=%.1f\n", mode, secs, cpu, 100*cpu/wall, sum/n/1024, max/1024, anon/1024, file/1024
}'
