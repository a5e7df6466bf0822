package runtime

import (
	"encoding/json"
	"sync"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// ProcessUser is the user a container's process runs as: the uid, gid and
// groups of its OCI spec's process.user, after the image's config and the
// pod's securityContext were applied (what kubelet reports as
// containerStatuses[].user.linux, from the CRI's ContainerStatus.user).
type ProcessUser struct {
	UID, GID int64
	// SupplementalGroups are all the process's groups, its gid first
	// (process.user.additionalGids).
	SupplementalGroups []int64
}

// procUserCache holds the process users decoded from containers' specs,
// which never change, so that a spec is decoded once per container. The
// zero value is ready to use.
type procUserCache struct {
	mu sync.Mutex
	m  map[string]*ProcessUser // by container ID; nil: the spec has none
}

// of returns the process user of the container id from its spec (nil when
// it has no spec or no process).
func (c *procUserCache) of(id string, spec interface{ GetValue() []byte }) *ProcessUser {
	c.mu.Lock()
	u, ok := c.m[id]
	c.mu.Unlock()
	if ok || spec == nil {
		return u
	}
	var s struct {
		Process *struct {
			User specs.User `json:"user"`
		} `json:"process"`
	}
	if err := json.Unmarshal(spec.GetValue(), &s); err != nil {
		return nil
	}
	if s.Process != nil {
		pu := s.Process.User
		u = &ProcessUser{UID: int64(pu.UID), GID: int64(pu.GID)}
		for _, g := range pu.AdditionalGids {
			u.SupplementalGroups = append(u.SupplementalGroups, int64(g))
		}
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]*ProcessUser{}
	}
	c.m[id] = u
	c.mu.Unlock()
	return u
}

// forget drops the containers not in keep.
func (c *procUserCache) forget(keep map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.m {
		if !keep[id] {
			delete(c.m, id)
		}
	}
}
