#!/usr/bin/env bash
# Pod start latency and agent memory with many pods (issue 6), event-driven
# PLEG against relist-only, in one run. See hack/bench/pods/main.go.
#   hack/bench/pods/pods.sh [-cluster-dir DIR] [-pods 50] [-rss-pods 100] [-json FILE] ...
# Uses the running local cluster in $NODEAGENT_CLUSTER_DIR (or -cluster-dir),
# else starts one for the run. Needs root and hack/build-controlplane.sh done.
set -euo pipefail
cd "$(dirname "$0")/../../.."
# The agent binary exactly as `make build` makes it (its size is part of the
# RSS), in a directory of its own so that concurrent builds do not replace it.
make -s build BIN=_output/benchpods
go build -o _output/benchpods/podsbench ./hack/bench/pods
exec _output/benchpods/podsbench -agent _output/benchpods/nodeagent "$@"
