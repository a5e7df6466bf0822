#!/usr/bin/env bash
# test-multinode.sh: the multi-node cluster's short form (issue 31,
# docs/multinode.md), in `make test` beside other phases.
#
# Starts a local cluster of 3 nodeagent nodes (`localcluster up --nodes 3`:
# each node a network namespace of its own with its own containerd, rootDir,
# cgroup root and CNI configuration; the pod network, kube-proxy and CoreDNS
# as pods), then checks:
#   1. the add-ons run: the routeagent and kube-proxy DaemonSets on every
#      node, CoreDNS available;
#   2. a Deployment of 3 is spread over the 3 nodes;
#   3. pod-to-pod TCP and UDP from node-1 to pods on the other nodes;
#   4. a ClusterIP and a NodePort Service (on node-2's address) reach a pod
#      on node-3 from a pod on node-1 (kube-proxy);
#   5. the Service's DNS name resolves to its ClusterIP through CoreDNS, and
#      a headless Service's (clusterIP: None, over the spread Deployment)
#      to the Deployment's 3 pod IPs, from a pod on each node;
#   6. node-3's agent killed: the node goes NotReady (Unknown) after the
#      node lifecycle controller's grace (20 s here, --node-monitor-grace-period)
#      and its Deployment pod is replaced on the other nodes after the
#      taint-based eviction's toleration (10 s here,
#      --default-unreachable-toleration-seconds).
# Every wait is bounded; any failed check fails the script. KEEP=1 leaves
# the cluster up after a failure (stop it with `localcluster down --dir ...`).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
T0=$SECONDS
log() { printf '%s [%3ds] %s\n' "$(date +%H:%M:%S)" "$((SECONDS - T0))" "$*" >&2; }
fail() {
	log "FAIL: $*"
	exit 1
}
[[ $(id -u) == 0 ]] || fail "test-multinode needs root (network namespaces, containerd)"

# --- build (all cached) --------------------------------------------------------
hack/build-controlplane.sh >/dev/null
hack/build-kube-proxy.sh >/dev/null
hack/build-coredns.sh >/dev/null
go build -o _output/bin/localcluster ./hack/localcluster
# The product's flags (hack/build.sh): its build cache has client-go.
CGO_ENABLED=0 go build -trimpath -tags grpcnotrace -ldflags='-s -w' -o _output/bin/routeagent ./hack/routeagent
AGENT=${NODEAGENT_BIN:-$ROOT/_output/bin/nodeagent}
[[ -x $AGENT ]] || fail "$AGENT is missing: run make build"
# The e2e images' programs, as hack/conformance.sh caches them (agnhost:
# netexec serves TCP and UDP and dials either): it builds them if they are
# not cached, and prints their directory (it alone computes the cache key).
images=$(hack/conformance.sh --build-images-only | tail -n1) || fail "building the e2e images' programs"
[[ -s $images/agnhost && -s $images/nnp && -s $images/pause && -s $images/localhost.key && -s $images/busybox ]] ||
	fail "hack/conformance.sh --build-images-only left no e2e images' programs in '$images'"

DIR=$(mktemp -d /tmp/na-mn.XXXXXX)
LC=$ROOT/_output/bin/localcluster
k() { "$ROOT/_output/bin/kubectl" --kubeconfig "$DIR/kubeconfig/admin.kubeconfig" "$@"; }
cleanup() {
	local rc=$?
	set +e
	if [[ $rc != 0 ]]; then
		k get nodes -o wide
		k get pods -A -o wide
		for f in "$DIR"/logs/node-*-agent.log; do
			[[ -f $f ]] && { echo "--- $f (last 20 lines)"; tail -n 20 "$f"; }
		done
	fi
	if [[ $rc != 0 && ${KEEP:-} == 1 ]]; then
		log "KEEP=1: the cluster stays up in $DIR"
	else
		"$LC" down --dir "$DIR" >/dev/null 2>&1
		rm -rf --one-file-system "$DIR"
	fi
	if [[ $rc == 0 ]]; then log "PASS: multi-node short form in $((SECONDS - T0))s"; else log "FAIL: multi-node short form after $((SECONDS - T0))s"; fi
}
trap cleanup EXIT

log "== a 3-node cluster in $DIR"
"$LC" up --dir "$DIR" --nodes 3 --e2e-images "$images" --cluster-cidr 10.247.0.0/16 \
	--node-monitor-grace-period 20s --pod-eviction-toleration 10s >/dev/null || fail "localcluster up --nodes 3"
log "up in $((SECONDS - T0))s"
ip_of() { k get node "$1" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}'; }

log "== 1. the add-ons"
k -n kube-system rollout status ds/routeagent --timeout=120s >/dev/null || fail "routeagent DaemonSet not ready"
k -n kube-system rollout status ds/kube-proxy --timeout=120s >/dev/null || fail "kube-proxy DaemonSet not ready"
k -n kube-system rollout status deploy/coredns --timeout=180s >/dev/null || fail "CoreDNS not available"
log "ok: routeagent and kube-proxy on every node, CoreDNS available"

log "== 2. a Deployment spread over the nodes"
AGN=registry.k8s.io/e2e-test-images/agnhost:2.56
k apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: echo}
spec:
  replicas: 3
  selector: {matchLabels: {app: echo}}
  template:
    metadata: {labels: {app: echo}}
    spec:
      terminationGracePeriodSeconds: 1
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, nodeTaintsPolicy: Honor, labelSelector: {matchLabels: {app: echo}}}
      containers:
      - {name: netexec, image: $AGN, args: [netexec, --http-port=8080, --udp-port=8081]}
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  nodeSelector: {kubernetes.io/hostname: node-1}
  terminationGracePeriodSeconds: 1
  containers:
  - {name: netexec, image: $AGN, args: [netexec, --http-port=8080, --udp-port=8081]}
---
apiVersion: v1
kind: Pod
metadata: {name: target, labels: {app: target}}
spec:
  nodeSelector: {kubernetes.io/hostname: node-3}
  terminationGracePeriodSeconds: 1
  containers:
  - {name: netexec, image: $AGN, args: [netexec, --http-port=8080, --udp-port=8081]}
---
apiVersion: v1
kind: Service
metadata: {name: target}
spec:
  selector: {app: target}
  ports:
  - {name: http, port: 80, targetPort: 8080, protocol: TCP}
---
apiVersion: v1
kind: Service
metadata: {name: echo-headless}
spec:
  clusterIP: None
  selector: {app: echo}
  ports:
  - {name: http, port: 8080, protocol: TCP}
---
apiVersion: v1
kind: Service
metadata: {name: target-np}
spec:
  type: NodePort
  selector: {app: target}
  ports:
  - {name: http, port: 80, targetPort: 8080, protocol: TCP}
EOF
k rollout status deploy/echo --timeout=120s >/dev/null || fail "Deployment echo not available"
k wait --for=condition=Ready pod/client pod/target --timeout=120s >/dev/null || fail "pods client and target not Ready"
nodes=$(k get pods -l app=echo -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u | tr '\n' ' ')
[[ $nodes == "node-1 node-2 node-3 " ]] || fail "Deployment echo's pods are on '$nodes', want one on each of node-1 node-2 node-3"
log "ok: the Deployment's 3 pods are on $nodes"

log "== 3. pod-to-pod TCP and UDP across nodes (from node-1)"
# cx CMD...: runs a command in the client pod (on node-1), bounded.
cx() { timeout 60 "$ROOT/_output/bin/kubectl" --kubeconfig "$DIR/kubeconfig/admin.kubeconfig" exec client -- "$@"; }
for n in node-2 node-3; do
	pod=$(k get pods -l app=echo --field-selector spec.nodeName=$n -o jsonpath='{.items[0].metadata.name}')
	pip=$(k get pod "$pod" -o jsonpath='{.status.podIP}')
	got=$(cx wget -qO- -T 10 "http://$pip:8080/hostname") || fail "TCP from client (node-1) to $pod ($pip on $n)"
	[[ $got == "$pod" ]] || fail "TCP to $pip:8080 answered '$got', want $pod"
	log "ok: TCP node-1 -> $pod ($pip on $n)"
	got=$(cx wget -qO- -T 10 "http://127.0.0.1:8080/dial?request=hostname&protocol=udp&host=$pip&port=8081&tries=3") || fail "UDP dial from client to $pip"
	[[ $got == *"\"$pod\""* ]] || fail "UDP to $pip:8081 answered '$got', want $pod"
	log "ok: UDP node-1 -> $pod ($pip on $n)"
done

log "== 4. ClusterIP and NodePort Services (node-1 -> a pod on node-3)"
cip=$(k get svc target -o jsonpath='{.spec.clusterIP}')
got=$(cx wget -qO- -T 10 "http://$cip/hostname") || fail "ClusterIP $cip from client"
[[ $got == target ]] || fail "ClusterIP $cip answered '$got', want target"
log "ok: ClusterIP $cip:80 -> target (node-3)"
np=$(k get svc target-np -o jsonpath='{.spec.ports[0].nodePort}')
n2=$(ip_of node-2)
got=$(cx wget -qO- -T 10 "http://$n2:$np/hostname") || fail "NodePort $n2:$np from client"
[[ $got == target ]] || fail "NodePort $n2:$np answered '$got', want target"
log "ok: NodePort $n2:$np (node-2) -> target (node-3)"

log "== 5. DNS through CoreDNS"
got=$(cx nslookup target.default.svc.cluster.local) || fail "nslookup target.default.svc.cluster.local: $got"
[[ $got == *"$cip"* ]] || fail "nslookup target.default.svc.cluster.local gave '$got', want $cip"
log "ok: target.default.svc.cluster.local -> $cip"
# The headless Service: CoreDNS answers with the ready endpoints' pod
# IPs (one A record each), asked from the echo pod on each node.
want=$(k get pods -l app=echo -o jsonpath='{range .items[*]}{.status.podIP}{"\n"}{end}' | sort | tr '\n' ' ')
hl=echo-headless.default.svc.cluster.local
for n in node-1 node-2 node-3; do
	pod=$(k get pods -l app=echo --field-selector spec.nodeName=$n -o jsonpath='{.items[0].metadata.name}')
	got=
	for _ in $(seq 20); do
		# The A records after the answer's "Name:" line (busybox nslookup).
		got=$(timeout 30 "$ROOT/_output/bin/kubectl" --kubeconfig "$DIR/kubeconfig/admin.kubeconfig" exec "$pod" -- nslookup -type=a "$hl" 2>/dev/null |
			awk '/^Name:/ { n = 1 } n && /^Address/ { print $2 }' | sort | tr '\n' ' ') || true
		[[ $got == "$want" ]] && break
		sleep 1
	done
	[[ $got == "$want" ]] || fail "nslookup $hl from $pod ($n) gave '$got', want the Deployment's pod IPs '$want'"
	log "ok: headless $hl -> $got from $pod ($n)"
done

log "== 6. node-3 stopped: NotReady after the grace, its pod replaced"
old=$(k get pods -l app=echo --field-selector spec.nodeName=node-3 -o jsonpath='{.items[0].metadata.name}')
s=$SECONDS
"$LC" stop-node node-3 --dir "$DIR" || fail "stop-node node-3"
k wait --for=condition=Ready=Unknown node/node-3 --timeout=90s >/dev/null || fail "node-3 not NotReady (Unknown) within 90s of its agent's death"
log "ok: node-3 Ready=Unknown $((SECONDS - s))s after its agent was killed (grace 20s)"
ok= st=
for _ in $(seq 120); do
	# The replacement: 3 pods Ready, not terminating, none on node-3; the
	# old one terminating or gone.
	st=$(k get pods -l app=echo -o jsonpath='{range .items[*]}{.metadata.name}|{.metadata.deletionTimestamp}|{.spec.nodeName}|{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')
	live=$(awk -F'|' '$2=="" && $3!="node-3" && $4=="True"' <<<"$st" | wc -l)
	oldlive=$(awk -F'|' -v o="$old" '$1==o && $2==""' <<<"$st" | wc -l)
	if [[ $live == 3 && $oldlive == 0 ]]; then
		ok=1
		break
	fi
	sleep 1
done
[[ -n $ok ]] || fail "the Deployment has not 3 Ready pods off node-3 within 120s (name|deletion|node|ready: $(echo $st))"
log "ok: $old evicted from node-3 and replaced: 3 Ready pods on node-1 and node-2 $((SECONDS - s))s after the agent died"
