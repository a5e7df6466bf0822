#!/usr/bin/env bash
# test-join.sh: `kubeadm join` with nodeagent in kubelet's place (issue 26).
#
# An operator's kubeadm worker join, for real: the nodeagent .deb installed in
# a Debian booted with systemd-nspawn (hack/test-systemd.sh's cached root),
# containerd as the node's runtime at its default socket (the host's binaries,
# CRI on, as kubeadm expects), kubeadm built from the pinned Kubernetes
# (hack/build-kubeadm.sh), and the local control plane on the host prepared
# as `kubeadm init` would for joins (localcluster kubeadm-join-prepare:
# cluster-info signed by the bootstrapsigner, kubeadm-config, kubelet-config,
# kubeadm's RBAC, a bootstrap token). Then, in the container:
#
#   kubeadm join <apiserver> --token <token> --discovery-token-ca-cert-hash sha256:<hash> --node-name <node>
#
# and checks: its preflight passes its kubelet checks (`kubelet --version`,
# kubelet.service enabled, port 10250 free) without ignoring them; it writes
# kubelet's files and `systemctl restart kubelet` starts nodeagent through the
# package's kubelet.service; kubeadm's wait for the healthz port and for
# /etc/kubernetes/kubelet.conf ends; the join succeeds; the Node is
# registered and Ready; its client certificate is the one a CSR by the
# bootstrap token got issued (kubelet-client-current.pem under
# /var/lib/kubelet/pki); the Lease renews; no configuration warning names
# a field of kubeadm's KubeletConfiguration as unsupported; a restart of kubelet.service after the
# join (bootstrap-kubelet.conf gone, as kubeadm leaves it) comes back Ready
# without a new CSR; `kubeadm reset -f` stops the agent and removes kubeadm's
# files.
#
# The container shares the host's network (it reaches the API server on
# 127.0.0.1); nothing else is contacted. When kubelet's ports 10248/10250 are
# taken on the host (another agent), the kubelet-config uses free ports and
# the Port-10250 preflight check is skipped by name.
#
# Needs root, systemd-nspawn, debootstrap (first run), containerd, runc and
# containernetworking-plugins on the host, and the local cluster (started if
# none is running and stopped again). NODEAGENT_TEST_DEB=path uses that .deb
# instead of building one; KEEP=1 keeps the container and work dir on
# failure.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

T0=$SECONDS
TSTEP=$SECONDS
log() { printf '%s [%3ds] %s\n' "$(date +%H:%M:%S)" "$((SECONDS - T0))" "$*" >&2; }
step() {
	log "  ... done in $((SECONDS - TSTEP))s"
	TSTEP=$SECONDS
	log "== $*"
}
fail() {
	log "FAIL: $*"
	exit 1
}

[[ $(id -u) == 0 ]] || fail "test-join needs root (systemd-nspawn, dpkg in a container)"
for tool in systemd-nspawn debootstrap nsenter containerd containerd-shim-runc-v2 runc ctr openssl python3 curl; do
	command -v "$tool" >/dev/null || fail "$tool is not installed (hack/ensure-deps.sh)"
done
[[ -x /usr/lib/cni/loopback ]] || fail "no /usr/lib/cni/loopback (apt-get install containernetworking-plugins)"

WORK=$(mktemp -d /var/tmp/nodeagent-test-join.XXXXXX)
MACHINE=najoin-$$
NODE=join-$$-$RANDOM
POD=joined-$$
NSPAWN_PID=
LEADER=
STARTED_CLUSTER=
OVERLAY=
APICHECK=$ROOT/_output/bin/systemd-test-apicheck
KUBECTL=$ROOT/_output/bin/kubectl

cleanup() {
	local rc=$?
	set +e
	if [[ $rc != 0 && -n $LEADER ]]; then
		log "--- journal of kubelet.service in the container (last 80 lines)"
		c journalctl -u kubelet --no-pager -n 80 >&2
		c systemctl status kubelet containerd --no-pager >&2
	fi
	if [[ $rc != 0 && ${KEEP:-} == 1 ]]; then
		log "KEEP=1: leaving container $MACHINE (nspawn pid $NSPAWN_PID, leader $LEADER) and $WORK"
		return
	fi
	if [[ -n ${KUBECONFIG:-} && -x $APICHECK ]]; then
		"$KUBECTL" delete pod "$POD" --ignore-not-found --grace-period=0 --force >/dev/null 2>&1
		"$APICHECK" delete "$NODE" 2>/dev/null
	fi
	if [[ -n $NSPAWN_PID ]] && kill -0 "$NSPAWN_PID" 2>/dev/null; then
		[[ -n $LEADER ]] && kill -KILL "$LEADER" 2>/dev/null
		kill -TERM "$NSPAWN_PID" 2>/dev/null
		for _ in $(seq 1 100); do kill -0 "$NSPAWN_PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$NSPAWN_PID" 2>/dev/null
		wait "$NSPAWN_PID" 2>/dev/null
	fi
	cgd_cleanup
	if [[ -n $OVERLAY ]]; then
		umount "$OVERLAY" || umount -l "$OVERLAY"
	fi
	if [[ -n $STARTED_CLUSTER ]]; then
		hack/localcluster.sh down >/dev/null 2>&1
	fi
	rm -rf --one-file-system "$WORK"
	if [[ $rc == 0 ]]; then
		log "PASS: test-join in $((SECONDS - T0))s"
	else
		log "FAIL: test-join after $((SECONDS - T0))s"
	fi
}
trap cleanup EXIT

# c runs a command inside the container (all its namespaces), with a clean
# environment.
c() {
	nsenter -t "$LEADER" -m -u -i -n -p -C -- env -i PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"
}
prop() { c systemctl show -P "$2" "$1"; }
wait_for() {
	local timeout=$1 what=$2 deadline=$((SECONDS + $1))
	shift 2
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || fail "timed out after ${timeout}s waiting for $what"
		sleep 0.2
	done
}
expect_eq() { # DESCRIPTION GOT WANT
	[[ $2 == "$3" ]] || fail "$1: got '$2', want '$3'"
	log "ok: $1 = $3"
}
port_free() { ! ss -Htln "sport = :$1" | grep -q .; }
free_port() { # a free TCP port on the host
	local p
	for _ in $(seq 1 50); do
		p=$((20000 + RANDOM % 20000))
		port_free "$p" && { echo "$p"; return; }
	done
	fail "no free port"
}
source hack/systemd-test/cgroup-driver.sh
# cgroup-driver.sh's cin is c (which enters the cgroup namespace too).

# --- build -----------------------------------------------------------------

log "== build: the .deb, kubeadm"
VERSION=$(
	source <(sed -n '/^version() {/,/^}/p' hack/package.sh)
	version
)
DIST=$WORK/dist
mkdir -p "$DIST"
if [[ -n ${NODEAGENT_TEST_DEB:-} ]]; then
	# make test's package phase built it already.
	[[ -f $NODEAGENT_TEST_DEB ]] || fail "NODEAGENT_TEST_DEB=$NODEAGENT_TEST_DEB does not exist"
	DEB=$(basename "$NODEAGENT_TEST_DEB")
	cp "$NODEAGENT_TEST_DEB" "$DIST/"
	log "using $NODEAGENT_TEST_DEB"
else
	DIST=$DIST ARCHES=amd64 NODEAGENT_VERSION=$VERSION hack/package.sh
	DEB=nodeagent_${VERSION}_amd64.deb
fi
[[ -f $DIST/$DEB ]] || fail "no $DIST/$DEB"
t=$SECONDS
hack/build-kubeadm.sh
log "kubeadm ready in $((SECONDS - t))s ($(_output/bin/kubeadm version -o short))"
go build -o "$APICHECK" ./hack/systemd-test/apicheck
go build -o _output/bin/localcluster ./hack/localcluster

# --- cluster -----------------------------------------------------------------

step "local cluster, prepared as kubeadm init would for joins"
if ! _output/bin/localcluster status >/dev/null 2>&1; then
	log "no local cluster running: starting one (hack/localcluster.sh up)"
	hack/localcluster.sh up >/dev/null
	STARTED_CLUSTER=1
fi
eval "$(_output/bin/localcluster env)"
[[ -x $KUBECTL ]] || fail "no $KUBECTL (make controlplane)"
HEALTHZ_PORT=10248 KUBELET_PORT=10250 IGNORE=
if ! port_free 10248; then HEALTHZ_PORT=$(free_port); fi
if ! port_free 10250; then
	KUBELET_PORT=$(free_port)
	IGNORE=--ignore-preflight-errors=Port-10250
	log "port 10250 is taken on this host: the kubelet-config uses $KUBELET_PORT, preflight Port-10250 ignored"
fi
eval "$(_output/bin/localcluster kubeadm-join-prepare --healthz-port "$HEALTHZ_PORT" --port "$KUBELET_PORT")"
TOKEN_ID=${KUBEADM_TOKEN%%.*}
log "apiserver $KUBEADM_ENDPOINT, token $TOKEN_ID.<secret>, CA $KUBEADM_CA_CERT_HASH, node $NODE, healthz $HEALTHZ_PORT, port $KUBELET_PORT"
# kube-controller-manager's bootstrapsigner signs cluster-info for the token.
wait_for 30 "cluster-info signed for token $TOKEN_ID" \
	bash -c "'$KUBECTL' -n kube-public get configmap cluster-info -o jsonpath='{.data.jws-kubeconfig-$TOKEN_ID}' | grep -q ."

# --- boot --------------------------------------------------------------------

step "boot Debian with systemd-nspawn"
ROOTFS=$(hack/systemd-test/rootfs.sh)
mkdir -p "$WORK/upper" "$WORK/ovlwork" "$WORK/root"
if mount -t overlay overlay -o "lowerdir=$ROOTFS,upperdir=$WORK/upper,workdir=$WORK/ovlwork" "$WORK/root" 2>/dev/null; then
	OVERLAY=$WORK/root
else
	log "overlayfs not available: booting a copy of the cached root"
	cp -a --reflink=auto "$ROOTFS/." "$WORK/root/"
fi
mkdir -p "$WORK/root/pkgs" "$WORK/root/usr/local/bin"
cp "$DIST/$DEB" "$WORK/root/pkgs/"
cp _output/bin/kubeadm "$WORK/root/usr/local/bin/kubeadm"
go build -o _output/bin/systemd-test-testimage ./hack/systemd-test/testimage
_output/bin/systemd-test-testimage "$WORK/root/busybox.tar" || fail "write the test image"
for bin in containerd containerd-shim-runc-v2 runc ctr; do
	cp "$(command -v "$bin")" "$WORK/root/usr/local/bin/"
done
# The node's containerd, as a distribution's containerd.service: its default
# socket /run/containerd/containerd.sock, CRI on (kubeadm's preflight asks
# it whether the runtime is ready).
cat >"$WORK/root/etc/systemd/system/containerd.service" <<'UNIT'
[Unit]
Description=containerd container runtime
After=network.target
[Service]
ExecStart=/usr/local/bin/containerd
Type=notify
Delegate=yes
KillMode=process
Restart=always
[Install]
WantedBy=multi-user.target
UNIT
ln -s /etc/systemd/system/containerd.service "$WORK/root/etc/systemd/system/multi-user.target.wants/containerd.service"
# The node's hostname resolves (kubeadm's HostnameCheck); debootstrap writes
# no hosts file.
[[ -e $WORK/root/etc/hosts ]] || printf '127.0.0.1 localhost\n' >"$WORK/root/etc/hosts"
# containerd's overlayfs snapshots cannot live on the container's overlay
# root: its state directory is a directory of the host's file system.
mkdir -p "$WORK/containerd-root"
binds=("--bind=$WORK/containerd-root:/var/lib/containerd")
cgd_before_boot
source hack/systemd-test/boot.sh
nspawn_boot
log "container $MACHINE booted ($state)"
# kubeadm's cgroupDriver: systemd: the agent's slices under the container's
# systemd need its controller hierarchies writable (cgroup-driver.sh).
cgd_writable
wait_for 30 "containerd in the container" c test -S /run/containerd/containerd.sock
# The test pod's image, as a node's image cache would hold it.
c ctr --address /run/containerd/containerd.sock --namespace k8s.io images import /busybox.tar >/dev/null ||
	fail "import the test image"

# --- install -----------------------------------------------------------------

step "install the .deb"
c dpkg -i "/pkgs/$DEB" </dev/null >"$WORK/dpkg-install.log" 2>&1 || { cat "$WORK/dpkg-install.log" >&2; fail "dpkg -i"; }
KUBELET_VERSION=$(c kubelet --version)
[[ $KUBELET_VERSION =~ ^Kubernetes\ v1\.34\.4\+nodeagent\. ]] || fail "kubelet --version: '$KUBELET_VERSION'"
log "ok: kubelet --version = $KUBELET_VERSION"
expect_eq "kubelet.service enabled by postinst" "$(c systemctl is-enabled kubelet.service)" enabled
expect_eq "kubelet.service before the join" "$(prop kubelet.service ActiveState)" inactive
out=$(c systemd-analyze verify /lib/systemd/system/kubelet.service 2>&1) || true
[[ -z $out ]] || fail "systemd-analyze verify kubelet.service in the container: $out"

# --- join --------------------------------------------------------------------

step "kubeadm join"
t=$SECONDS
c kubeadm join "$KUBEADM_ENDPOINT" --token "$KUBEADM_TOKEN" --discovery-token-ca-cert-hash "$KUBEADM_CA_CERT_HASH" \
	--node-name "$NODE" $IGNORE -v=1 </dev/null >"$WORK/join.log" 2>&1 || { cat "$WORK/join.log" >&2; fail "kubeadm join"; }
JOIN_SECONDS=$((SECONDS - t))
sed 's/^/  | /' "$WORK/join.log" | grep -v '^  | I' >&2 || true
grep -q 'This node has joined the cluster' "$WORK/join.log" || fail "kubeadm join did not say the node joined"
log "ok: kubeadm join succeeded in ${JOIN_SECONDS}s"
# Its preflight ran the kubelet checks and they passed.
! grep -E '\[WARNING (KubeletVersion|Service-Kubelet)\]' "$WORK/join.log" || fail "kubeadm preflight warned about the kubelet"

for f in /var/lib/kubelet/config.yaml /var/lib/kubelet/kubeadm-flags.env /etc/kubernetes/kubelet.conf /etc/kubernetes/pki/ca.crt; do
	c test -s "$f" || fail "kubeadm join left no $f"
done
! c test -e /etc/kubernetes/bootstrap-kubelet.conf || fail "bootstrap-kubelet.conf is still there (kubeadm removes it after the join)"
log "kubeadm-flags.env: $(c cat /var/lib/kubelet/kubeadm-flags.env)"
expect_eq "kubelet.service after the join" "$(prop kubelet.service ActiveState)" active
expect_eq "nodeagent.service after the join" "$(prop nodeagent.service ActiveState)" inactive
MAINPID=$(prop kubelet.service MainPID)
expect_eq "kubelet.service runs" "$(c readlink "/proc/$MAINPID/exe")" /usr/bin/nodeagent
log "kubelet.service command line: $(c cat "/proc/$MAINPID/cmdline" | tr '\0' ' ')"

# --- the node ------------------------------------------------------------------

step "the Node: Ready, certificate from a CSR, Lease renewing"
"$APICHECK" registered "$NODE" || fail "no Node $NODE with its Lease"
# As on a kubeadm node before a CNI add-on is deployed: no network
# configuration, so the Node is NotReady for the network (as kubelet's).
# Then the add-on's part, done by hand: its plugin and configuration.
"$KUBECTL" get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}' >"$WORK/notready"
grep -q 'NetworkPluginNotReady' "$WORK/notready" || fail "before a CNI configuration: Ready message '$(cat "$WORK/notready")'"
log "ok: NotReady until a CNI configuration exists: $(cat "$WORK/notready")"
c mkdir -p /opt/cni/bin /etc/cni/net.d
cp /usr/lib/cni/loopback "$WORK/root/opt/cni/bin/"
printf '{"cniVersion": "1.0.0", "name": "test", "plugins": [{"type": "loopback"}]}\n' >"$WORK/root/etc/cni/net.d/10-test.conflist"
"$APICHECK" ready "$NODE" 120s
expect_eq "Node's kubeletVersion" "Kubernetes $("$KUBECTL" get node "$NODE" -o jsonpath='{.status.nodeInfo.kubeletVersion}')" "$KUBELET_VERSION"
# (the container shares the host's network)
curl -fsS "http://127.0.0.1:$HEALTHZ_PORT/healthz" >/dev/null ||
	fail "no healthz on 127.0.0.1:$HEALTHZ_PORT"
log "ok: healthz answers on 127.0.0.1:$HEALTHZ_PORT (kubelet-config healthzPort)"
# The client certificate: kubelet's layout, issued for a CSR the token sent.
CURRENT=$(c readlink /var/lib/kubelet/pki/kubelet-client-current.pem) || fail "/var/lib/kubelet/pki/kubelet-client-current.pem is not a symlink"
[[ $CURRENT =~ ^(/var/lib/kubelet/pki/)?kubelet-client-[0-9-]+\.pem$ ]] || fail "kubelet-client-current.pem -> '$CURRENT', want kubelet-client-<time>.pem"
log "ok: /var/lib/kubelet/pki/kubelet-client-current.pem -> $CURRENT"
c grep -q 'client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem' /etc/kubernetes/kubelet.conf ||
	fail "kubelet.conf does not name /var/lib/kubelet/pki/kubelet-client-current.pem"
c cat /var/lib/kubelet/pki/kubelet-client-current.pem | openssl x509 -noout -fingerprint -sha256 >"$WORK/node-cert.fp"
expect_eq "node certificate subject" "$(c cat /var/lib/kubelet/pki/kubelet-client-current.pem | openssl x509 -noout -subject -nameopt RFC2253)" "subject=CN=system:node:$NODE,O=system:nodes"
"$KUBECTL" get csr -o json >"$WORK/csrs.json"
python3 - "$WORK/csrs.json" "$TOKEN_ID" "$NODE" >"$WORK/csr-cert.pem" <<'PY' || fail "no issued CSR of the bootstrap token for $NODE"
import base64, json, sys
csrs, token, node = json.load(open(sys.argv[1]))["items"], sys.argv[2], sys.argv[3]
found = [c for c in csrs if c["spec"]["username"] == "system:bootstrap:" + token
         and c["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet"
         and any(x["type"] == "Approved" for x in c.get("status", {}).get("conditions", []))
         and c.get("status", {}).get("certificate")]
if len(found) != 1:
    sys.exit("want one approved, issued CSR from system:bootstrap:%s, got %d" % (token, len(found)))
sys.stderr.write("CSR %s by %s, usages %s\n" % (found[0]["metadata"]["name"], found[0]["spec"]["username"], found[0]["spec"]["usages"]))
sys.stdout.write(base64.b64decode(found[0]["status"]["certificate"]).decode())
PY
expect_eq "node certificate is the CSR's" "$(openssl x509 -noout -fingerprint -sha256 <"$WORK/csr-cert.pem")" "$(cat "$WORK/node-cert.fp")"
"$APICHECK" renewed "$NODE" "$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)" 30s
log "ok: the Lease renews"
# Every field of kubeadm's KubeletConfiguration is used, or changes nothing
# at kubeadm's value: no warning names one as unsupported.
c journalctl -u kubelet --no-pager -o cat >"$WORK/journal"
if grep -q 'ignoring KubeletConfiguration fields that nodeagent does not support' "$WORK/journal"; then
	grep -o 'ignoring KubeletConfiguration fields[^(]*' "$WORK/journal" | head -n1 >&2
	fail "kubeadm's KubeletConfiguration has fields nodeagent reports unsupported"
fi
log "ok: no KubeletConfiguration field reported unsupported"

# --- a pod ---------------------------------------------------------------------

step "a pod on the joined node, and kubectl logs through its node API"
"$KUBECTL" create -f - >/dev/null <<YAML || fail "create the pod"
apiVersion: v1
kind: Pod
metadata: {name: $POD, namespace: default}
spec:
  nodeName: $NODE
  # nspawn keeps CAP_NET_ADMIN from the container: no pod network namespace.
  hostNetwork: true
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 2
  containers:
  - name: c
    image: docker.io/nodeagent/busybox:test
    imagePullPolicy: Never
    command: [sh, -c, "echo joined with kubeadm; sleep 3600"]
YAML
"$KUBECTL" wait --for=condition=Ready "pod/$POD" --timeout=120s >/dev/null || {
	"$KUBECTL" describe pod "$POD" >&2
	fail "the pod did not become Ready"
}
log "ok: pod $POD Ready on $NODE"
wait_for 30 "kubectl logs $POD" bash -c "'$KUBECTL' logs '$POD' | grep -qx 'joined with kubeadm'"
log "ok: kubectl logs $POD (API server -> the node API on port $KUBELET_PORT, kubeadm's x509/webhook authentication)"
"$KUBECTL" delete pod "$POD" --wait=true --timeout=60s >/dev/null || fail "delete the pod"

# --- restart -----------------------------------------------------------------

step "systemctl restart kubelet after the join"
NCSR=$("$KUBECTL" get csr -o name | wc -l)
c systemctl restart kubelet.service || fail "systemctl restart kubelet"
expect_eq "kubelet.service after restart" "$(prop kubelet.service ActiveState)" active
"$APICHECK" renewed "$NODE" "$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)" 30s
"$APICHECK" ready "$NODE" 60s
expect_eq "CSRs after the restart (the certificate is kept)" "$("$KUBECTL" get csr -o name | wc -l)" "$NCSR"

# --- reset -------------------------------------------------------------------

step "kubeadm reset"
c kubeadm reset -f </dev/null >"$WORK/reset.log" 2>&1 || { cat "$WORK/reset.log" >&2; fail "kubeadm reset"; }
expect_eq "kubelet.service after reset" "$(prop kubelet.service ActiveState)" inactive
for f in /etc/kubernetes/kubelet.conf /var/lib/kubelet/config.yaml /etc/kubernetes/pki/ca.crt; do
	! c test -e "$f" || fail "kubeadm reset left $f"
done
log "ok: kubeadm reset stopped the agent and removed kubeadm's files"
# Skipped at boot now (no config.yaml), not failed.
c systemctl start kubelet.service
expect_eq "kubelet.service start after reset: ConditionResult" "$(prop kubelet.service ConditionResult)" no

step "done (kubeadm join ${JOIN_SECONDS}s)"
