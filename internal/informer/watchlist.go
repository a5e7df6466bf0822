package informer

import (
	clientfeatures "k8s.io/client-go/features"
)

// Since client-go 0.35 its reflectors sync through a streaming list (a
// watch with sendInitialEvents, the WatchListClient gate) by default.
// Kubelet 1.34, whose API server version the agent reports and is tested
// against, lists then watches; so does the agent until the streaming list
// is measured in the fleet (issue 17): its informers are few and small, and
// a protocol change under every Pod, Node, Secret and ConfigMap informer is
// not a library update's side effect. Fakes without watch-list semantics
// (IsWatchListSemanticsUnSupported) would make no difference then.
func init() {
	clientfeatures.ReplaceFeatureGates(listThenWatch{clientfeatures.FeatureGates()})
}

// listThenWatch is client-go's gates with WatchListClient off.
type listThenWatch struct{ clientfeatures.Gates }

func (g listThenWatch) Enabled(f clientfeatures.Feature) bool {
	if f == clientfeatures.WatchListClient {
		return false
	}
	return g.Gates.Enabled(f)
}
