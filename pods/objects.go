package pods

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/pods/objcache"
	"github.com/nodeagent/nodeagent/pods/volume"
)

// newProjector makes the writer of secret, configMap, downwardAPI and
// projected volumes, with the Manager's caches of the Secrets and
// ConfigMaps pods reference (watched one by one, as kubelet's watch-based
// managers; the env of containers may share them). A change of a watched
// object wakes the workers of the pods that use it, so that their volumes
// are updated at once rather than at the next periodic sync.
func (m *Manager) newProjector() *volume.Projector {
	o := m.opts
	po := volume.ProjectorOptions{Node: o.Node, Clock: o.Clock, Logger: o.Logger, Tokens: o.Tokens}
	if o.Client != nil {
		po.Client = o.Client.ServiceAccounts
		m.secrets = objcache.NewSecrets(o.Client.Secrets, o.Logger.With("cache", "secrets"))
		m.configMaps = objcache.NewConfigMaps(o.Client.ConfigMaps, o.Logger.With("cache", "configmaps"))
		m.secrets.OnChange(m.pokeUIDs)
		m.configMaps.OnChange(m.pokeUIDs)
		po.Secrets, po.ConfigMaps = m.secrets, m.configMaps
	}
	return volume.NewProjectorWithOptions(po)
}

// pokeUIDs wakes the workers of the pods with these UIDs.
func (m *Manager) pokeUIDs(uids []types.UID, _, _ string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, uid := range uids {
		if w := m.workers[uid]; w != nil {
			w.poke()
		}
	}
}

var _ volume.SecretGetter = (*objcache.Cache[*v1.Secret])(nil)
var _ volume.ConfigMapGetter = (*objcache.Cache[*v1.ConfigMap])(nil)
