#!/usr/bin/env bash
# Idle cost of one agent with the heartbeat running: CPU over a window, and
# memory four ways: RSS (what top and ps show), its anonymous part (the
# agent's own memory), its file-backed part (clean pages of the binary the
# kernel can drop), and the working set as kubelet and cAdvisor report it for
# a cgroup (usage minus inactive file pages) of a memory cgroup of its own.
# The agent runs from a fresh copy of the binary whose page cache is dropped
# (dd iflag=nocache), so the pages it touches are charged to its cgroup and
# not to whatever process read the binary first.
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
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  cg=/sys/fs/cgroup/nodeagent-bench-idle-$$ # cgroup v2
else
  cg=/sys/fs/cgroup/memory/nodeagent-bench-idle-$$ # cgroup v1
fi
mkdir "$cg"
pid=
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rmdir "$cg" 2>/dev/null; _output/bin/kubectl delete node "$node" --wait=false >/dev/null 2>&1; rm -rf "$work"' EXIT
cp _output/bin/nodeagent "$work/nodeagent"
sync "$work/nodeagent"
dd if="$work/nodeagent" iflag=nocache count=0 status=none
# working set (bytes) of the cgroup, as cAdvisor computes it.
workingset() {
  if [ -f "$cg/memory.current" ]; then
    awk -v u="$(cat "$cg/memory.current")" '$1 == "inactive_file" {print u - $2}' "$cg/memory.stat"
  else
    awk -v u="$(cat "$cg/memory.usage_in_bytes")" '$1 == "total_inactive_file" {print u - $2}' "$cg/memory.stat"
  fi
}
{
  echo "apiVersion: config.nodeagent.io/v1alpha1"
  echo "kind: NodeAgentConfiguration"
  echo "rootDir: $work/root"
  echo "healthzPort: 0"
  echo "cniConfDir: \"\"" # no pod network: Ready does not wait for one
  if [ "$mode" = full ]; then echo "containerRuntimeEndpoint: unix://$NODEAGENT_CONTAINERD_ADDRESS"; else echo "containerRuntimeEndpoint: unix://$work/absent.sock"; fi
} > "$work/config.yaml"
# The shell joins the cgroup, then becomes the agent: everything it charges
# is in the cgroup from its first page.
sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$cg" \
  "$work/nodeagent" --config "$work/config.yaml" --kubeconfig "$kc" --hostname-override "$node" 2>"$work/log" &
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
c0=$(cpu); t0=$(date +%s.%N); maxrss=0; sum=0; n=0; maxws=0
end=$(( $(date +%s) + secs ))
while [ "$(date +%s)" -lt "$end" ]; do
  rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
  sum=$((sum + rss)); n=$((n + 1)); [ "$rss" -gt "$maxrss" ] && maxrss=$rss
  ws=$(workingset); [ "$ws" -gt "$maxws" ] && maxws=$ws
  sleep 5
done
ws=$(workingset)
c1=$(cpu); t1=$(date +%s.%N)
# Where the RSS is: the agent's own (anonymous) memory versus clean pages of
# the executable and other files it has touched.
anon=$(awk '/^Anonymous:/ {print $2}' /proc/$pid/smaps_rollup)
file=$(awk '/^Rss:/ {r=$2} /^Anonymous:/ {a=$2} END {print r-a}' /proc/$pid/smaps_rollup)
awk -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v tck="$tck" -v sum="$sum" -v n="$n" -v max="$maxrss" -v mode="$mode" -v secs="$secs" -v anon="$anon" -v file="$file" -v ws="$ws" -v maxws="$maxws" 'BEGIN {
  cpu = (c1 - c0) / tck; wall = t1 - t0
  printf "mode=%s window=%ds cpu_seconds=%.2f cpu_percent_of_one_core=%.3f rss_avg_MiB=%.1f rss_max_MiB=%.1f rss_anonymous_MiB=%.1f rss_file_backed_MiB=%.1f working_set_MiB=%.1f working_set_max_MiB=%.1f\n", mode, secs, cpu, 100*cpu/wall, sum/n/1024, max/1024, anon/1024, file/1024, ws/1048576, maxws/1048576
}'
