#!/usr/bin/env bash
# Runs upstream Kubernetes e2e specs against a node run by nodeagent,
# compiled in from the pin in hack/controlplane/go.mod (see
# hack/controlplane/conformance), one selection a run (--set):
#   node      (default; make test) the NodeLease specs and the
#             [NodeConformance] specs of k8s.io/kubernetes/test/e2e/common/node
#             (without [Serial], [Slow], [Disruptive], [Flaky]), and a short
#             form of the feature specs (4 in-place resize, 2 pod generation);
#             judged by the lists in hack/conformance/;
#   features  (make conformance-features) the in-place resize and pod
#             generation (observedGeneration) specs at length; lists in
#             hack/conformance/features/;
#   userns    (make test, make conformance-features) the user namespace
#             specs, on containerd 2.x with runc 1.5 (below); lists in
#             hack/conformance/userns/;
#   full      (make conformance-full) every [Conformance] spec of test/e2e,
#             the [Serial] ones one at a time after the others, against a
#             multi-node cluster of nodeagent nodes with the add-ons
#             (localcluster up --nodes N; docs/multinode.md) that the run
#             starts and stops (or --cluster=DIR's); lists in
#             hack/conformance/full/. Steps 3 and 3b below are the
#             cluster's start instead; the suite binary is a second one,
#             built with the conformancefull tag (full_test.go imports the
#             SIG packages) and keyed apart.
# The user namespace specs need a runtime that has them: for the userns
# set the agent runs on a private containerd 2.x
# (hack/build-containerd.sh) whose shims run runc 1.5
# (hack/build-runc.sh), started under the run's work directory and
# stopped with it (the cluster's own containerd, Debian's 1.6 with runc
# 1.1, serves the other sets: that runc is built without seccomp, and the
# resize specs' pods ask for RuntimeDefault). Steps:
#   1. compiles the suite and the ginkgo CLI, or reuses binaries cached
#      outside the work tree, keyed by hack/controlplane/go.mod+go.sum, the
#      suite's sources and the Go version;
#   2. builds the e2e images the specs use (agnhost and nonewprivs from the
#      module with the control plane's flags (hack/upstream-go.sh), pause from the module's pause.c, busybox
#      1.37.0 from its source (Debian's copy of the release tarball, checked
#      against its sha256) with its defconfig, static, as Docker's busybox
#      image that upstream's mirrors; the programs are cached the same way,
#      see internal/testing/testimage.E2EImages for the layouts) and imports them
#      into the agent's containerd namespace under the names the specs use,
#      since nothing can be pulled here (after step 3's containerd starts,
#      for a set on containerd 2.x);
#   3. starts one agent with node credentials as conformance-<random> and a
#      CNI bridge network over the node's pod CIDR, waits until it is Ready;
#   4. runs the specs in parallel (CONFORMANCE_PROCS processes, default 6);
#      each waits until that node is the only Ready schedulable node, since
#      the specs pick a random one;
#   5. prints one line per spec and judges the run with
#      hack/conformance/ratchet against hack/conformance/known-failures.txt
#      (specs known not to pass, each with how it fails),
#      expected-specs.txt (every spec a full run reports) and
#      timing-sensitive.txt (specs that may pass on a second attempt): it
#      fails on a spec that does not pass and is not listed, a listed spec
#      that fails differently or passes now, an expected spec that reported
#      nothing, a second attempt of a spec not named timing-sensitive, a NodeLease
#      spec that does not pass, and a suite that failed outside the specs;
#   6. stops the agent (SIGTERM), deletes its Node and Lease and the bridge.
# Needs a running local cluster: NODEAGENT_CLUSTER_DIR (hack/localcluster.sh
# up; `make test` provides one) and _output/bin/nodeagent (make build).
#   --set=node|features|userns  the selection (above; default node)
#   --update-known-failures  rewrite the set's known-failures.txt,
#                            expected-specs.txt and its list in
#                            docs/conformance.md from this run (it refuses
#                            to file a new failure: classify it by hand)
#   --nodes=N                --set=full: the cluster's nodes (default 3)
#   --cluster=DIR            --set=full: run against the multi-node cluster
#                            in DIR (localcluster up --nodes N --e2e-images
#                            ... --e2e-stand-ins ...; see run_full_cluster)
#                            instead of starting one; it stays up
# Other arguments go to the ginkgo CLI instead of the set's selection,
# e.g. --focus='Probing' (judged against the set's lists, partially).
# Durations: see docs/conformance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
log() { echo "conformance: $*" >&2; }
die() { log "$*"; exit 1; }
now() { date +%s; }

# --build-images-only: step 2 alone (the e2e images' programs into their
# cache; hack/test-multinode.sh uses them), no cluster needed.
# --build-only: steps 1 and 2 (the suite, the ginkgo CLI, the e2e images'
# programs), no cluster needed; prints the suite's path, the CLI's and the
# images' directory, one a line (hack/test-vm.sh's long form runs the suite
# against its guest's node).
images_only=
build_only=
if [ "${1:-}" = --build-images-only ]; then
  images_only=1
  shift
elif [ "${1:-}" = --build-only ]; then
  build_only=1
  shift
fi
update=
set=node
nodes=3
cluster_dir=
ginkgo_args=()
for a in "$@"; do
  case "$a" in
    --update-known-failures) update=1 ;;
    --set=*) set=${a#--set=} ;;
    --nodes=*) nodes=${a#--nodes=} ;;
    --cluster=*) cluster_dir=$(cd "${a#--cluster=}" && pwd) ;;
    *) ginkgo_args+=("$a") ;;
  esac
done
full=
[ "$set" != full ] || full=1
lc=$root/_output/bin/localcluster
kubectl() { "$root/_output/bin/kubectl" --kubeconfig "$KUBECONFIG" "$@"; }
if [ -z "$images_only" ] && [ -z "$build_only" ] && [ -z "$full" ]; then
[ -n "${NODEAGENT_CLUSTER_DIR:-}" ] ||
  die "NODEAGENT_CLUSTER_DIR is not set: start a cluster with 'hack/localcluster.sh up' and 'eval \"\$(_output/bin/localcluster env)\"'"
agent=${NODEAGENT_BIN:-$root/_output/bin/nodeagent}
[ -x "$agent" ] || die "$agent is missing: run 'make build'"
if [ ! -x "$lc" ]; then
  go build -o "$lc" ./hack/localcluster
fi
"$lc" status --dir "$NODEAGENT_CLUSTER_DIR" >/dev/null ||
  die "no cluster is running in $NODEAGENT_CLUSTER_DIR: start one with 'hack/localcluster.sh up --dir $NODEAGENT_CLUSTER_DIR'"
eval "$("$lc" env --dir "$NODEAGENT_CLUSTER_DIR")"
fi
# Each set's lists (timing-sensitive.txt is shared), the section of
# docs/conformance.md its update rewrites, and its runtime.
case "$set" in
  node) lists=hack/conformance section=known-failures runtime=cluster ;;
  features) lists=hack/conformance/$set section=known-failures-$set runtime=cluster ;;
  userns) lists=hack/conformance/$set section=known-failures-$set runtime=current ;;
  full) lists=hack/conformance/$set section=known-failures-$set runtime=cluster ;;
  *) die "--set=$set: want node, features, userns or full" ;;
esac
procs=${CONFORMANCE_PROCS:-6}
cache_root=${NODEAGENT_CACHE_DIR:-/var/cache/nodeagent-dev}
# The upstream programs below build with the control plane's flag set, in
# subshells (the agent's own programs here keep the Makefile's).
upstream_flagset=$(source hack/upstream-go.sh && echo "$UPSTREAM_GO_FLAGSET")

if [ -z "$images_only" ]; then
# 1. The suite binary and the ginkgo CLI (parallel runs need it; it must
# match the suite's ginkgo library, so it comes from the same module).
# The full set's binary: built with the conformancefull tag, whose file
# (full_test.go) imports the SIG packages of test/e2e; they need three
# modules more than hack/controlplane/go.mod requires (sample-apiserver
# for the aggregator specs, testify), added in a copy of go.mod and go.sum
# (go -modfile) so that the control plane's pin, and every cache keyed by
# it, stays as it is. full_test.go is in the full binary's key only.
full_requires="k8s.io/sample-apiserver@v0.0.0 github.com/stretchr/testify@v1.10.0 github.com/stretchr/objx@v0.5.2"
if [ -n "$full" ]; then
  key=$( (cat hack/controlplane/go.mod hack/controlplane/go.sum hack/controlplane/conformance/full.sum
          find hack/controlplane/conformance -type f -name '*.go' | LC_ALL=C sort | xargs cat
          go version; echo "$upstream_flagset"; echo "tags=conformancefull $full_requires") | sha256sum | cut -c1-16)
else
  key=$( (cat hack/controlplane/go.mod hack/controlplane/go.sum
          find hack/controlplane/conformance -type f -name '*.go' ! -name full_test.go | LC_ALL=C sort | xargs cat
          go version; echo "$upstream_flagset") | sha256sum | cut -c1-16)
fi
cache=$cache_root/conformance/$key
suite=$cache/conformance.test
ginkgo=$cache/ginkgo
if [ -x "$suite" ] && [ -x "$ginkgo" ]; then
  log "suite binary and ginkgo CLI cached in $cache"
else
  log "compiling the upstream suite (k8s.io/kubernetes test/e2e${full:+, every SIG}; cold about 2-10 minutes on 2 cores${full:+ for the node set, several times that for the full one}, cached afterwards in $cache)"
  s=$(now)
  mkdir -p "$cache"
  build_args=()
  if [ -n "$full" ]; then
    cp hack/controlplane/go.mod "$cache/full.mod"
    cat hack/controlplane/go.sum hack/controlplane/conformance/full.sum >"$cache/full.sum"
    req=()
    for r in $full_requires; do req+=("-require=$r"); done
    (cd hack/controlplane && go mod edit -modfile="$cache/full.mod" "${req[@]}")
    build_args=(-modfile="$cache/full.mod" -tags=conformancefull)
  fi
  # With hack/build-controlplane.sh's flags, so packages it already compiled
  # come from the Go build cache.
  (source hack/upstream-go.sh && cd hack/controlplane && go test -c -vet=off "${build_args[@]}" -o "$suite.tmp.$$" ./conformance &&
    go build "${build_args[@]}" -o "$ginkgo.tmp.$$" github.com/onsi/ginkgo/v2/ginkgo)
  mv -f "$suite.tmp.$$" "$suite"
  mv -f "$ginkgo.tmp.$$" "$ginkgo"
  log "compiled in $(( $(now) - s ))s"
fi

fi

# 2. The e2e images' programs, keyed by the module pin and the toolchains.
kdir=$(cd hack/controlplane && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
ikey=$( (cat hack/controlplane/go.mod hack/controlplane/go.sum; go version; echo "$upstream_flagset"; gcc --version | head -n1) | sha256sum | cut -c1-16)
images=$cache_root/e2eimages/$ikey
if [ -s "$images/agnhost" ] && [ -s "$images/nnp" ] && [ -s "$images/pause" ] && [ -s "$images/localhost.key" ]; then
  log "e2e image programs cached in $images"
else
  log "compiling agnhost, nonewprivs and pause for the e2e images (cold several minutes on 2 cores, cached afterwards in $images)"
  s=$(now)
  mkdir -p "$images"
  t=$(mktemp -d "$images/tmp.XXXXXX")
  (source hack/upstream-go.sh && cd hack/controlplane &&
    go build -ldflags '-s -w' -o "$t/agnhost" k8s.io/kubernetes/test/images/agnhost &&
    go build -ldflags '-s -w' -o "$t/nnp" k8s.io/kubernetes/test/images/nonewprivs)
  # As build/pause/Makefile does, with the tag of the image's name.
  gcc -Os -Wall -Werror -static -DVERSION=v3.10.1-nodeagent -o "$t/pause" "$kdir/build/pause/linux/pause.c" ||
    die "compiling pause.c statically failed: it needs gcc and libc6-dev (hack/ensure-deps.sh)"
  cp "$kdir/test/images/agnhost/porter/localhost.crt" "$kdir/test/images/agnhost/porter/localhost.key" "$t/"
  chmod u+w "$t"/localhost.*
  for f in agnhost nnp pause localhost.crt localhost.key; do mv -f "$t/$f" "$images/$f"; done
  rmdir "$t"
  log "compiled in $(( $(now) - s ))s"
fi
# busybox as upstream's image has it: Debian's busybox-static builds an ash
# that drops environment variables whose names are not shell identifiers
# (the envFrom specs print them with "sh -c env"); the release's defconfig
# keeps them. Cached by tarball and compiler; CONFIG_TC is off because tc
# does not build against current kernel headers.
bb_version=1.37.0
bb_sha256=3311dff32e746499f4df0d5df04d7eb396382d7e108bb9250e7b519b837043a4
bb_url=http://deb.debian.org/debian/pool/main/b/busybox/busybox_$bb_version.orig.tar.bz2
# The build's own settings are part of the key.
bb_config='s/^# CONFIG_STATIC is not set/CONFIG_STATIC=y/; s/^CONFIG_TC=y/# CONFIG_TC is not set/'
bbkey=$( (echo "$bb_sha256"; echo "$bb_config"; gcc --version | head -n1) | sha256sum | cut -c1-16)
bbcache=$cache_root/busybox/$bbkey
if [ ! -x "$bbcache/busybox" ]; then
  log "compiling busybox $bb_version (cold about 2-4 minutes on 2 idle cores, cached afterwards in $bbcache)"
  s=$(now)
  mkdir -p "$bbcache"
  rm -rf "$bbcache"/tmp.* # an interrupted build's
  t=$(mktemp -d "$bbcache/tmp.XXXXXX")
  curl -fsSL --connect-timeout 20 --max-time 300 --retry 3 -o "$t/src.tar.bz2" "$bb_url" ||
    die "downloading $bb_url failed (Debian's mirror must be reachable once; the build is cached afterwards)"
  echo "$bb_sha256  $t/src.tar.bz2" | sha256sum -c --quiet - || die "$bb_url: sha256 mismatch"
  tar -xjf "$t/src.tar.bz2" -C "$t"
  (cd "$t/busybox-$bb_version" &&
    make -s defconfig >/dev/null &&
    sed -i "$bb_config" .config &&
    grep -qx 'CONFIG_STATIC=y' .config &&
    make -s -j"$(nproc)" busybox >"$t/build.log" 2>&1) || {
    tail -n 30 "$t/build.log" >&2 2>/dev/null
    die "compiling busybox $bb_version failed (needs gcc, make, bzip2, libc6-dev)"
  }
  mv -f "$t/busybox-$bb_version/busybox" "$bbcache/busybox"
  rm -rf "$t"
  log "compiled in $(( $(now) - s ))s"
fi
cp -f "$bbcache/busybox" "$images/busybox"
if [ -n "$images_only" ]; then
  log "e2e images' programs in $images"
  # Their directory, for callers (hack/test-multinode.sh): the key is
  # computed here only.
  echo "$images"
  exit 0
fi
if [ -n "$build_only" ]; then
  log "suite $suite, ginkgo CLI $ginkgo, e2e images' programs in $images"
  printf '%s\n' "$suite" "$ginkgo" "$images"
  exit 0
fi
# The CSI driver for the upstream storage specs (CONFORMANCE_STORAGE=0
# leaves it out): the stand-in host-path driver and registrar
# (internal/testing/csihostpath), and kubernetes-csi's external-provisioner,
# external-resizer and external-attacher from their pinned modules
# (hack/build-csi-sidecars.sh: cached, a copy when warm; make test starts
# its cold build beside go test).
# Static, since their image has nothing else; Go's build cache keeps the
# driver. Only with the node set (make test's).
storage=${CONFORMANCE_STORAGE:-1}
storage_left_out=
if [ "$set" != node ]; then
  storage=0
elif [ "$storage" = 0 ]; then
  storage_left_out=1
fi
import_args=(--e2e "$images")
if [ "$storage" != 0 ]; then
  s=$(now)
  csidir=$root/_output/conformance-csi
  mkdir -p "$csidir"
  CGO_ENABLED=0 go build -o "$csidir/csihostpath" ./internal/testing/csihostpath/cmd/csihostpath
  nice -n 10 hack/build-csi-sidecars.sh || die "building external-provisioner, external-resizer and external-attacher failed"
  cp -f "$root/_output/bin/csi-provisioner" "$root/_output/bin/csi-resizer" "$root/_output/bin/csi-attacher" "$csidir/"
  import_args+=(--csi "$csidir")
  log "CSI driver (stand-in), external-provisioner, external-resizer and external-attacher built in $(( $(now) - s ))s"
fi
go build -o "$root/_output/bin/importimage" ./hack/importimage
go build -o "$root/_output/bin/ratchet" ./hack/conformance/ratchet
if [ "$runtime" = current ]; then
  # Built (or linked from their caches) before the clock of the run starts.
  cbin=$(hack/build-containerd.sh | tail -n1) || die "building containerd 2.x failed"
  runc=$(hack/build-runc.sh | tail -n1) || die "building runc failed"
fi

# 3 (--set=full). A multi-node cluster of nodeagent nodes with the
# add-ons (docs/multinode.md), every node with the e2e images and the full
# suite's stand-ins (testimage.E2EStandIns); then steps 4 and 5 for the
# [Conformance] specs. The cluster is the run's own (started in a
# temporary directory, stopped at the end; KEEP=1 leaves it up after a
# failure) unless --cluster=DIR names one.
if [ -n "$full" ]; then
  own_cluster=
  [ -n "$cluster_dir" ] || {
    own_cluster=1
    hack/build-controlplane.sh >/dev/null
    hack/build-kube-proxy.sh >/dev/null
    hack/build-coredns.sh >/dev/null
    # The product's flags (hack/build.sh), as hack/test-multinode.sh builds it.
    CGO_ENABLED=0 go build -trimpath -tags grpcnotrace -ldflags='-s -w' -o "$root/_output/bin/routeagent" ./hack/routeagent
    agent=${NODEAGENT_BIN:-$root/_output/bin/nodeagent}
    [ -x "$agent" ] || die "$agent is missing: run 'make build'"
    cluster_dir=$(mktemp -d /tmp/na-conffull.XXXXXX)
  }
  go build -o "$lc" ./hack/localcluster
  out=$root/_output/conformance
  mkdir -p "$out"
  full_cleanup() {
    local rc=$?
    set +e
    if [ -n "$own_cluster" ]; then
      if [ "$rc" != 0 ]; then
        for f in "$cluster_dir"/logs/*.log; do [ -f "$f" ] && cp "$f" "$out/"; done
        log "the cluster's logs (agents, containerds, control plane): $out/"
      fi
      if [ "$rc" != 0 ] && [ "${KEEP:-}" = 1 ]; then
        log "KEEP=1: the cluster stays up in $cluster_dir (stop it with '$lc down --dir $cluster_dir')"
      else
        "$lc" down --dir "$cluster_dir" >/dev/null 2>&1
        rm -rf --one-file-system "$cluster_dir"
      fi
    fi
    exit "$rc"
  }
  trap full_cleanup EXIT
  trap 'exit 130' INT TERM
  s=$(now)
  if [ -n "$own_cluster" ]; then
    # The stand-ins' inputs (testimage.E2EStandIns): upstream's test/images
    # and the dig and getent stand-in, static (the product's module).
    standins=$out/standins
    rm -rf "$standins"
    mkdir -p "$standins"
    ln -s "$kdir/test/images" "$standins/test-images"
    CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$standins/e2edns" ./hack/e2edns
    log "starting a $nodes-node cluster in $cluster_dir"
    "$lc" up --dir "$cluster_dir" --nodes "$nodes" --e2e-images "$images" --e2e-stand-ins "$standins" \
      --cluster-cidr 10.245.0.0/16 >/dev/null || die "localcluster up --nodes $nodes failed"
  fi
  "$lc" status --dir "$cluster_dir" >/dev/null || die "no cluster is running in $cluster_dir"
  eval "$("$lc" env --dir "$cluster_dir")"
  kubectl -n kube-system rollout status ds/routeagent --timeout=300s >/dev/null || die "the routeagent DaemonSet is not ready"
  kubectl -n kube-system rollout status ds/kube-proxy --timeout=300s >/dev/null || die "the kube-proxy DaemonSet is not ready"
  kubectl -n kube-system rollout status deploy/coredns --timeout=300s >/dev/null || die "CoreDNS is not available"
  ready=$(kubectl get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -cx True || true)
  [ "$ready" -ge 2 ] || die "$ready Ready nodes in $cluster_dir: the full set needs a multi-node cluster"
  log "cluster of $ready Ready nodes with the add-ons in $(( $(now) - s ))s"
  # The API server (in the host's namespace) dials webhooks and aggregated
  # API servers at their pod IPs (localcluster's --enable-aggregator-routing):
  # the host gets a route to each node's pod CIDR via the node, as the pod
  # network's DaemonSet gives a kubeadm control plane node (proto 77, as
  # the route agent's; they go with the cluster's bridge).
  while read -r cidr nip; do
    [ -n "$cidr" ] && [ -n "$nip" ] || continue
    ip route replace "$cidr" via "$nip" proto 77 || die "ip route replace $cidr via $nip"
    log "host route to pod CIDR $cidr via $nip"
  done < <(kubectl get nodes -o jsonpath='{range .items[*]}{.spec.podCIDR}{" "}{.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}')
  # 4. Every [Conformance] spec; ginkgo runs the [Serial] ones (the Serial
  # decorator of framework.WithSerial) on process 1 after the parallel
  # ones. The framework flags test/e2e's own setup would fill in: the node
  # count, the kubectl the sig-cli specs run, a JUnit and a JSON report.
  s=$(now)
  src=0
  suite_args=(--kubeconfig "$KUBECONFIG" --nodeagent.results "$out/results.jsonl" --num-nodes "$ready"
    --kubectl-path "$root/_output/bin/kubectl")
  [ ${#ginkgo_args[@]} -gt 0 ] || suite_args+=(--nodeagent.set=full)
  rm -f "$out/results.jsonl"
  "$ginkgo" run --procs="$procs" --no-color --timeout="${CONFORMANCE_TIMEOUT:-6h}" --poll-progress-after=10m --flake-attempts=2 \
    --output-dir="$out" --json-report=report.json --junit-report=junit.xml "${ginkgo_args[@]}" \
    "$suite" -- "${suite_args[@]}" || src=$?
  wall=$(( $(now) - s ))
  log "specs (full) ran in ${wall}s with $procs processes on $ready nodes, suite exit status $src; load: $(cut -d' ' -f1-3 /proc/loadavg)"
  [ -s "$out/results.jsonl" ] || die "the suite wrote no results (exit status $src): see its output above"
  for f in "$cluster_dir"/logs/node-*-agent.log; do [ -f "$f" ] && cp "$f" "$out/"; done
  # 5. The judgement, as for the other sets.
  rc=0
  args=(--results "$out/results.jsonl" --known "$lists/known-failures.txt"
    --expected "$lists/expected-specs.txt" --timing hack/conformance/timing-sensitive.txt --suite-exit "$src")
  if [ ${#ginkgo_args[@]} -gt 0 ]; then
    log "ginkgo arguments given (${ginkgo_args[*]}): not every expected spec is required"
    args+=(--partial)
  fi
  if [ -n "$update" ]; then
    args+=(--update --docs docs/conformance.md --docs-section "$section" --wall "$wall")
  fi
  "$root/_output/bin/ratchet" "${args[@]}" || rc=$?
  exit "$rc"
fi

# 3. The agent, with a bridge network as an operator's CNI DaemonSet would
# install it (like internal/testing/testenv.WriteCNIConfig for the e2e tests).
id=$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')
node=conformance-$id
bridge=naconf$id # at most 15 characters
work=$(mktemp -d /tmp/na-conformance.XXXXXX)
pid=
ctrd_pid=
ctrd_sock=$NODEAGENT_CONTAINERD_ADDRESS
# The private containerd's shims (by their -address) and what runs below
# them; the host's and the cluster's containerd name other addresses.
kill_tree() {
  local c
  for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do kill_tree "$c"; done
  kill -KILL "$1" 2>/dev/null || true
}
stop_containerd() {
  local shim
  for shim in $(ps -eo pid=,args= | awk -v a="$ctrd_sock" '$2 ~ /containerd-shim/ { for (i = 3; i < NF; i++) if ($i == "-address" && $(i+1) == a) print $1 }'); do
    kill_tree "$shim"
  done
  kill -TERM "$ctrd_pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$ctrd_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$ctrd_pid" 2>/dev/null || true
  wait "$ctrd_pid" 2>/dev/null || true
}
csipod= csins=nodeagent-csi csidriver=hostpath.csi.k8s.io csictl=
# Without the CSI driver's pods: its node plugin and its controller's.
not_csi() { grep -vx "pod/$csipod" | grep -v '^pod/csi-controller-' || true; }
cleanup() {
  local rc=$?
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    # The specs delete their namespaces; let the agent stop those pods
    # (and detach them from the bridge) before it goes. The CSI driver goes
    # last: the agent needs it to unpublish the specs' volumes.
    for _ in $(seq 120); do
      [ -z "$(kubectl get pods -A --field-selector spec.nodeName="$node" -o name 2>/dev/null | not_csi)" ] && break
      sleep 0.5
    done
    if [ -n "$csipod" ]; then
      kubectl -n "$csins" delete deployment csi-controller --ignore-not-found --wait=false >/dev/null 2>&1 || true
      kubectl -n "$csins" delete pod "$csipod" --ignore-not-found --wait=false >/dev/null 2>&1 || true
      for _ in $(seq 60); do
        [ -z "$(kubectl get pods -A --field-selector spec.nodeName="$node" -o name 2>/dev/null)" ] && break
        sleep 0.5
      done
    fi
    kill -TERM "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      log "agent did not exit within 5s of SIGTERM; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  fi
  [ -z "$ctrd_pid" ] || stop_containerd
  kubectl delete node "$node" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  if [ -n "$csipod" ]; then
    kubectl delete namespace "$csins" --ignore-not-found --wait=false >/dev/null 2>&1 || true
    kubectl delete csidriver "$csidriver" --ignore-not-found --wait=false >/dev/null 2>&1 || true
    [ -z "$csictl" ] || kubectl delete -f "$csictl" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  fi
  kubectl -n kube-node-lease delete lease "$node" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  ip link del "$bridge" 2>/dev/null || true
  # The cgroup root, once its pods' cgroups are gone (deepest first).
  local cg
  for cg in /sys/fs/cgroup/*/nodeagent-conformance /sys/fs/cgroup/nodeagent-conformance; do
    [ -d "$cg" ] && find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  if [ "$rc" != 0 ] && [ -s "$work/agent.log" ]; then
    mkdir -p "$root/_output/conformance"
    cp "$work/agent.log" "$root/_output/conformance/$node.log"
    log "agent log: _output/conformance/$node.log; last lines:"
    tail -n 30 "$work/agent.log" >&2
  fi
  # Pods still running when the agent stopped keep their volume mounts (as
  # under kubelet); unmount them, deepest first, or rm cannot remove $work.
  local mounts
  mounts=$(awk -v w="$work/" 'index($2, w) == 1 {print $2}' /proc/self/mounts | sort -r)
  if [ -n "$mounts" ]; then
    log "unmounting $(wc -l <<<"$mounts") volume mounts left by pods that outlived the agent"
    while read -r m; do umount -l "$m" 2>/dev/null || true; done <<<"$mounts"
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$runtime" = current ]; then
  # containerd 2.x with its shim, runc 1.5 first in their PATH, its root,
  # state and sockets under the work directory; no CRI plugin
  # (localcluster's ContainerdConfig).
  # A pod's containers run as its user namespace's host IDs: they must be
  # able to traverse to their bundle and rootfs (runc: "remount-propagation
  # ... permission denied" under mktemp's 0700), as under /run/containerd.
  chmod 0711 "$work"
  mkdir -p -m 0711 "$work/ctrd" "$work/ctrd/root" "$work/ctrd/state"
  ctrd_sock=$work/ctrd/c.sock
  cat >"$work/ctrd/config.toml" <<EOF
version = 2
root = "$work/ctrd/root"
state = "$work/ctrd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.images", "io.containerd.cri.v1.runtime"]

[grpc]
  address = "$ctrd_sock"

[ttrpc]
  address = "$ctrd_sock.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""
EOF
  PATH="$(dirname "$runc"):$cbin:$PATH" "$cbin/containerd" --config "$work/ctrd/config.toml" >"$work/containerd.log" 2>&1 &
  ctrd_pid=$!
  for _ in $(seq 300); do [ -S "$ctrd_sock" ] && break; kill -0 "$ctrd_pid" 2>/dev/null || break; sleep 0.1; done
  [ -S "$ctrd_sock" ] || { tail -n 20 "$work/containerd.log" >&2; die "containerd 2.x did not start"; }
  log "containerd $("$cbin/containerd" --version | awk '{print $3}') with $("$runc" --version | head -n1) at $ctrd_sock"
fi
s=$(now)
# Into the agent's containerRuntimeNamespace, the default k8s.io.
"$root/_output/bin/importimage" --address "$ctrd_sock" --namespace k8s.io "${import_args[@]}" --timeout 5m |
  sed 's/^/conformance: imported /' >&2
log "e2e images imported in $(( $(now) - s ))s"

# The node API (logs, exec, attach, port-forward through the API server) on
# a free port, trusting the cluster CA that signed the API server's kubelet
# client certificate.
port=
for _ in $(seq 50); do
  p=$(( 30000 + RANDOM % 2000 ))
  if ! ss -Hltn "sport = :$p" | grep -q .; then port=$p; break; fi
done
[ -n "$port" ] || die "no free port for the node API in 30000-31999"
mkdir -p "$work/net.d"
cat >"$work/config.yaml" <<EOF
apiVersion: config.nodeagent.io/v1alpha1
kind: NodeAgentConfiguration
containerRuntimeEndpoint: unix://$ctrd_sock
rootDir: $work/root
podLogsDir: $work/log/pods
containerLogsDir: $work/log/containers
healthzPort: 0
port: $port
# A cgroup root of its own, not the host's /kubepods: make test runs the
# e2e tests beside this suite, and their agents without a containerd
# namespace of their own lay out /kubepods too (with other pods, so other
# QoS CPU weights).
cgroupRoot: /nodeagent-conformance
authentication:
  x509:
    clientCAFile: $NODEAGENT_CLUSTER_DIR/pki/ca.crt
# NotReady until the conflist below appears there.
cniConfDir: $work/net.d
# The e2e images are imported (nothing can be pulled): never collect them.
imageGCHighThresholdPercent: 100
# The machine is shared: builds and caches keep its disk near kubelet's 15 %
# imagefs default, and DiskPressure would taint the only node and fail every
# spec. Disk pressure itself is tested by e2e/eviction_test.go.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
EOF
nodekc=$("$lc" node-kubeconfig "$node" --dir "$NODEAGENT_CLUSTER_DIR")
log "starting nodeagent as node $node (log: $work/agent.log)"
s=$(now)
"$agent" --config "$work/config.yaml" --kubeconfig "$nodekc" --hostname-override "$node" >"$work/agent.log" 2>&1 &
pid=$!
deadline=$(( $(now) + 60 ))
until cidr=$(kubectl get node "$node" -o jsonpath='{.spec.podCIDR}' 2>/dev/null) && [ -n "$cidr" ]; do
  kill -0 "$pid" 2>/dev/null || die "nodeagent exited before its node had a pod CIDR"
  [ "$(now)" -lt "$deadline" ] || die "node $node has no spec.podCIDR 60s after the agent started (does kube-controller-manager allocate node CIDRs?)"
  sleep 0.5
done
cat >"$work/net.d/10-$bridge.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$bridge",
  "plugins": [
    {"type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$cidr"}]], "routes": [{"dst": "0.0.0.0/0"}],
              "dataDir": "$work/host-local"}},
    {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true}
  ]
}
EOF
log "node $node has pod CIDR $cidr: CNI bridge $bridge"
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

# 3b. The CSI driver of the storage specs, deployed as an operator deploys
# the host-path driver: a CSIDriver object; a privileged pod on the node
# with the node plugin (a Bidirectional mount of rootDir) and the registrar
# (kubelet's plugin registration); and the controller, a Deployment
# (hack/csi-sidecars/controller.yaml) holding the driver's controller
# service beside kubernetes-csi's external-provisioner, external-resizer
# and external-attacher (which has nothing to attach here: the CSIDriver
# says attachRequired false, and ATTACH=false), with upstream's RBAC for its
# ServiceAccount (in-cluster configuration; host network, since the API
# server listens on the host's loopback). The driver and registrar are stand-ins
# (internal/testing/csihostpath: csi-driver-host-path and
# node-driver-registrar are not served by the module proxy here);
# hack/conformance/storage-testdriver.yaml describes the driver to the specs.
storage_args=()
if [ "$storage" != 0 ]; then
  s=$(now)
  csipod=csi-hostpath-$id
  csiroot=$work/root
  sock=$csiroot/plugins/$csidriver/csi.sock
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: $csins}
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: $csidriver}
spec:
  attachRequired: false
  podInfoOnMount: true
  fsGroupPolicy: File
  volumeLifecycleModes: [Persistent, Ephemeral]
---
apiVersion: v1
kind: Pod
metadata: {name: $csipod, namespace: $csins}
spec:
  nodeName: $node
  hostNetwork: true
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 5
  volumes:
  - {name: root, hostPath: {path: $csiroot, type: Directory}}
  - {name: data, hostPath: {path: $work/csi-data, type: DirectoryOrCreate}}
  containers:
  - name: driver
    image: docker.io/nodeagent/csihostpath:conformance
    args: [-mode=driver, -drivername=$csidriver, -endpoint=$sock, -nodeid=$node, -maxvolumespernode=100, -datadir=/csi-data-dir]
    securityContext: {privileged: true}
    volumeMounts:
    - {name: root, mountPath: $csiroot, mountPropagation: Bidirectional}
    - {name: data, mountPath: /csi-data-dir}
  - name: registrar
    image: docker.io/nodeagent/csihostpath:conformance
    args: [-mode=registrar, -drivername=$csidriver, -registration-socket=$csiroot/plugins_registry/$csidriver-reg.sock, -kubelet-registration-path=$sock]
    volumeMounts:
    - {name: root, mountPath: $csiroot}
EOF
  # The controller, its placeholders filled (the rendered file is kept for
  # the cleanup, which deletes its cluster-wide roles).
  api=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  api=${api#https://}
  csictl=$work/csi-controller.yaml
  sed -e "s|\${NAMESPACE}|$csins|g" -e "s|\${NAME}|$csins-$id|g" -e "s|\${DRIVER}|$csidriver|g" \
    -e "s|\${NODE}|$node|g" -e "s|\${DATADIR}|$work/csi-data|g" -e "s|\${IMAGE}|docker.io/nodeagent/csihostpath:conformance|g" \
    -e "s|\${APIHOST}|${api%:*}|g" -e "s|\${APIPORT}|${api##*:}|g" -e "s|\${ATTACH}|false|g" \
    "$root/hack/csi-sidecars/controller.yaml" >"$csictl"
  kubectl apply -f "$csictl" >/dev/null
  until kubectl get csinode "$node" -o jsonpath='{.spec.drivers[*].name}' 2>/dev/null | grep -qw "$csidriver"; do
    kill -0 "$pid" 2>/dev/null || die "nodeagent exited before the CSI driver registered"
    [ "$(now)" -lt "$(( s + 90 ))" ] || {
      kubectl -n "$csins" describe pod "$csipod" >&2 || true
      die "the CSI driver $csidriver did not register with node $node within 90s"
    }
    sleep 0.5
  done
  log "CSI driver $csidriver registered on node $node $(( $(now) - s ))s after its pod was made"
  until [ "$(kubectl -n "$csins" get pods -l app.kubernetes.io/name=csi-controller -o jsonpath='{.items[*].status.containerStatuses[*].ready}' 2>/dev/null)" = "true true true true" ]; do
    kill -0 "$pid" 2>/dev/null || die "nodeagent exited before the CSI controller ran"
    [ "$(now)" -lt "$(( s + 120 ))" ] || {
      kubectl -n "$csins" describe pods -l app.kubernetes.io/name=csi-controller >&2 || true
      die "the CSI controller (external-provisioner, external-resizer, external-attacher) is not running 120s after it was made"
    }
    sleep 0.5
  done
  log "CSI controller (external-provisioner, external-resizer, external-attacher) running $(( $(now) - s ))s after its Deployment was made"
  # Some storage specs look into the node's pod directories (through a
  # privileged host-exec pod): they are under the agent's rootDir.
  storage_args=(--storage.testdriver "$root/hack/conformance/storage-testdriver.yaml" --kubelet-root-dir "$csiroot")
fi

# 4. The specs, in parallel: most of them wait for pods, several probe specs
# watch one for minutes. A spec that fails gets a second attempt
# (--flake-attempts=2), but the ratchet accepts a pass on the second attempt
# only for the specs hack/conformance/timing-sensitive.txt names (the probe
# specs' 1s timeouts are missed now and then on a shared 2-core machine at
# load averages above 10, as kubelet's would be), and counts every retry; a
# second attempt of any other spec fails the run.
s=$(now)
src=0
suite_args=(--kubeconfig "$KUBECONFIG" --nodeagent.node "$node" --nodeagent.results "$work/results.jsonl")
# The set's selection, unless the ginkgo arguments make their own.
[ ${#ginkgo_args[@]} -gt 0 ] || suite_args+=(--nodeagent.set="$set")
"$ginkgo" run --procs="$procs" --no-color --timeout=40m --poll-progress-after=5m --flake-attempts=2 "${ginkgo_args[@]}" \
  "$suite" -- "${suite_args[@]}" "${storage_args[@]}" || src=$?
wall=$(( $(now) - s ))
log "specs ($set) ran in ${wall}s with $procs processes, suite exit status $src"
alive=1
kill -0 "$pid" 2>/dev/null || { log "nodeagent exited during the run"; alive=; }
[ -s "$work/results.jsonl" ] || die "the suite wrote no results (exit status $src): see its output above"
mkdir -p "$root/_output/conformance"
cp "$work/results.jsonl" "$root/_output/conformance/results.jsonl"
cp "$work/agent.log" "$root/_output/conformance/agent.log"
if [ -n "$csipod" ]; then
  for c in driver registrar; do
    kubectl -n "$csins" logs "$csipod" -c "$c" >"$root/_output/conformance/csi-$c.log" 2>&1 || true
  done
  for c in hostpath csi-provisioner csi-resizer csi-attacher; do
    kubectl -n "$csins" logs deployment/csi-controller -c "$c" >"$root/_output/conformance/csi-controller-$c.log" 2>&1 || true
  done
fi

# 5. The judgement.
rc=0
args=(--results "$work/results.jsonl" --known "$lists/known-failures.txt"
  --expected "$lists/expected-specs.txt" --timing hack/conformance/timing-sensitive.txt --suite-exit "$src")
# A run that selects its own specs (--focus, ...) cannot be held to the
# full list of expected specs; it says so.
if [ ${#ginkgo_args[@]} -gt 0 ]; then
  log "ginkgo arguments given (${ginkgo_args[*]}): not every expected spec is required"
  args+=(--partial)
elif [ -n "$storage_left_out" ]; then
  log "CONFORMANCE_STORAGE=0: the storage specs are not required"
  args+=(--partial)
fi
if [ -n "$update" ]; then
  args+=(--update --docs docs/conformance.md --docs-section "$section" --wall "$wall")
fi
"$root/_output/bin/ratchet" "${args[@]}" || rc=$?
[ -n "$alive" ] || rc=1
exit "$rc"
