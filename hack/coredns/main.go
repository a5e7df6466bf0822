// Command coredns is CoreDNS with only the plugins kubeadm's Corefile uses
// (errors, health, ready, kubernetes, prometheus, forward, cache, loop,
// reload, loadbalance, and log), for the multi-node cluster's DNS add-on
// (docs/multinode.md). Upstream's main (core/plugin) links every plugin,
// the cloud ones with their SDKs; this one links what the cluster runs.
// Built by hack/build-coredns.sh, in a module of its own: CoreDNS pins
// its own k8s.io versions.
package main

import (
	_ "github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() { coremain.Run() }
