#!/usr/bin/env bash
# Idle cost of one agent with the heartbeat running: CPU over a window, and
# memory five ways: RSS (what top and ps show), its anonymous part (the
# agent's own memory) and its file-backed part (clean pages of the binary the
# kernel can drop), both from smaps_rollup; the anonymous memory of a memory
# cgroup of its own (cgroup v2 anon, v1 total_rss); and that cgroup's working
# set as kubelet and cAdvisor report it (usage minus inactive file pages).
# The agent runs from a fresh copy of the binary whose page cache is dropped
# (dd iflag=nocache), so the pages it touches are charged to its cgroup and
# not to whatever process read the binary first.
#   hack/bench/idle/idle.sh [SECONDS] [MODE]
#   BASELINE_AGENT=/path/to/old/nodeagent hack/bench/idle/idle.sh 300 full
# MODE: "full" (default: heartbeat, node status, containerd + PLEG) or
# "heartbeat-only" (containerd absent: heartbeat and node status, no PLEG) as a baseline.
# With BASELINE_AGENT, that binary (a previous build) runs beside the one
# `make build` makes, in the same window, each with its own node and cgroup:
# one line each, with the load average.
# Needs a running local cluster (hack/localcluster.sh up, or NODEAGENT_CLUSTER_DIR).
set -euo pipefail
cd "$(dirname "$0")/../../.."
secs=${1:-300}
mode=${2:-full}
make -s build
eval "$(_output/bin/localcluster env)"
work=$(mktemp -d)
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  cgroot=/sys/fs/cgroup # cgroup v2
else
  cgroot=/sys/fs/cgroup/memory # cgroup v1
fi
labels=(current)
bins=("$PWD/_output/bin/nodeagent")
if [ -n "${BASELINE_AGENT:-}" ]; then
  labels+=(baseline)
  bins+=("$BASELINE_AGENT")
fi
declare -A pid cg node
cleanup() {
  for l in "${labels[@]}"; do
    [ -n "${pid[$l]:-}" ] && { kill "${pid[$l]}" 2>/dev/null; wait "${pid[$l]}" 2>/dev/null; }
    [ -n "${cg[$l]:-}" ] && rmdir "${cg[$l]}" 2>/dev/null
    [ -n "${node[$l]:-}" ] && _output/bin/kubectl delete node "${node[$l]}" --wait=false >/dev/null 2>&1
    # The rootDir's shared bind mount (the agent makes one on a host whose
    # / is not shared, as kubelet does).
    umount -l "$work/$l/root" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
# working set (bytes) of cgroup $1, as cAdvisor computes it.
workingset() {
  if [ -f "$1/memory.current" ]; then
    awk -v u="$(cat "$1/memory.current")" '$1 == "inactive_file" {print u - $2}' "$1/memory.stat"
  else
    awk -v u="$(cat "$1/memory.usage_in_bytes")" '$1 == "total_inactive_file" {print u - $2}' "$1/memory.stat"
  fi
}
# anonymous memory (bytes) of cgroup $1.
cganon() { awk '$1 == "anon" || $1 == "total_rss" {print $2}' "$1/memory.stat"; }
start() { # LABEL BINARY
  local l=$1 d=$work/$1
  mkdir -p "$d"
  node[$l]=bench-idle-$mode-$l-$$
  cg[$l]=$cgroot/nodeagent-bench-idle-$l-$$
  mkdir "${cg[$l]}"
  cp "$2" "$d/nodeagent"
  sync "$d/nodeagent"
  dd if="$d/nodeagent" iflag=nocache count=0 status=none
  {
    echo "apiVersion: config.nodeagent.io/v1alpha1"
    echo "kind: NodeAgentConfiguration"
    echo "rootDir: $d/root"
    echo "podLogsDir: $d/log/pods"
    echo "containerLogsDir: $d/log/containers"
    echo "healthzPort: 0"
    echo "port: 0" # no node API: two agents run side by side
    echo "cniConfDir: \"\"" # no pod network: Ready does not wait for one
    echo "containerRuntimeNamespace: bench-idle-$l"
    if [ "$mode" = full ]; then echo "containerRuntimeEndpoint: unix://$NODEAGENT_CONTAINERD_ADDRESS"; else echo "containerRuntimeEndpoint: unix://$d/absent.sock"; fi
  } > "$d/config.yaml"
  local kc
  kc=$(_output/bin/localcluster node-kubeconfig "${node[$l]}")
  # The shell joins the cgroup, then becomes the agent: everything it charges
  # is in the cgroup from its first page.
  sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "${cg[$l]}" \
    "$d/nodeagent" --config "$d/config.yaml" --kubeconfig "$kc" --hostname-override "${node[$l]}" 2>"$d/log" &
  pid[$l]=$!
}
waitup() { # LABEL
  local l=$1
  for _ in $(seq 600); do
    # Registered and heartbeating, and Ready in full mode (without containerd the node is NotReady).
    if [ "$mode" = full ]; then
      [ "$(_output/bin/kubectl get "node/${node[$l]}" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ] && return
    else
      _output/bin/kubectl get "node/${node[$l]}" >/dev/null 2>&1 && _output/bin/kubectl -n kube-node-lease get lease "${node[$l]}" >/dev/null 2>&1 && return
    fi
    kill -0 "${pid[$l]}" 2>/dev/null || { echo "idle: the $l agent exited:"; cat "$work/$l/log"; exit 1; }
    sleep 0.1
  done
  echo "idle: the $l agent did not come up in 60s:"; tail "$work/$l/log"; exit 1
}
for i in "${!labels[@]}"; do start "${labels[$i]}" "${bins[$i]}"; done
for l in "${labels[@]}"; do waitup "$l"; done
sleep 20 # past start-up
tck=$(getconf CLK_TCK)
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
declare -A c0 maxrss sum maxws
for l in "${labels[@]}"; do c0[$l]=$(cpu "${pid[$l]}"); maxrss[$l]=0; sum[$l]=0; maxws[$l]=0; done
load0=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s.%N); n=0
end=$(( $(date +%s) + secs ))
while [ "$(date +%s)" -lt "$end" ]; do
  for l in "${labels[@]}"; do
    rss=$(awk '/VmRSS/ {print $2}' "/proc/${pid[$l]}/status")
    sum[$l]=$((sum[$l] + rss)); [ "$rss" -gt "${maxrss[$l]}" ] && maxrss[$l]=$rss
    ws=$(workingset "${cg[$l]}"); [ "$ws" -gt "${maxws[$l]}" ] && maxws[$l]=$ws
  done
  n=$((n + 1))
  sleep 5
done
t1=$(date +%s.%N)
load1=$(cut -d' ' -f1-3 /proc/loadavg)
for i in "${!labels[@]}"; do
  l=${labels[$i]}
  ws=$(workingset "${cg[$l]}")
  cga=$(cganon "${cg[$l]}")
  c1=$(cpu "${pid[$l]}")
  # Where the RSS is: the agent's own (anonymous) memory versus clean pages of
  # the executable and other files it has touched.
  anon=$(awk '/^Anonymous:/ {print $2}' "/proc/${pid[$l]}/smaps_rollup")
  file=$(awk '/^Rss:/ {r=$2} /^Anonymous:/ {a=$2} END {print r-a}' "/proc/${pid[$l]}/smaps_rollup")
  size=$(stat -c %s "${bins[$i]}")
  awk -v c0="${c0[$l]}" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v tck="$tck" -v sum="${sum[$l]}" -v n="$n" -v max="${maxrss[$l]}" -v mode="$mode" -v secs="$secs" -v anon="$anon" -v file="$file" -v ws="$ws" -v maxws="${maxws[$l]}" -v cga="$cga" -v label="$l" -v size="$size" -v load0="$load0" -v load1="$load1" 'BEGIN {
    cpu = (c1 - c0) / tck; wall = t1 - t0
    printf "agent=%s binary_bytes=%d mode=%s window=%ds cpu_seconds=%.2f cpu_percent_of_one_core=%.3f rss_avg_MiB=%.1f rss_max_MiB=%.1f rss_anonymous_MiB=%.1f rss_file_backed_MiB=%.1f cgroup_anon_MiB=%.1f working_set_MiB=%.1f working_set_max_MiB=%.1f load_average_start=\"%s\" load_average_end=\"%s\"\n", label, size, mode, secs, cpu, 100*cpu/wall, sum/n/1024, max/1024, anon/1024, file/1024, cga/1048576, ws/1048576, maxws/1048576, load0, load1
  }'
done
