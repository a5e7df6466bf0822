//go:build tools

// Package metricsserver pins metrics-server (sigs.k8s.io/metrics-server),
// built by hack/build-metrics-server.sh for the kubectl top e2e test
// (e2e/metricsserver_test.go), which runs it as a Deployment the way its
// upstream manifest does. A module of its own, beside hack/controlplane, so
// that its dependencies (Prometheus's text parser, its own k8s.io/apiserver)
// never touch the product's go.mod or the control plane's. (In
// hack/controlplane it would share the control plane's compiled packages,
// but v0.8.0 raises ginkgo, gRPC and golang.org/x there, and v0.7.2 does not
// build against k8s.io/apiserver v0.34.)
package metricsserver

import _ "sigs.k8s.io/metrics-server/cmd/metrics-server"
