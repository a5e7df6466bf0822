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

// specFacts are what the adapter reads from a container's OCI spec.
type specFacts struct {
	cgroupsPath string       // linux.cgroupsPath
	user        *ProcessUser // nil: the spec has no process
}

// specCache holds the facts decoded from containers' specs, which never
// change, so that a spec is decoded once per container (listings run on
// the PLEG's relist path). The zero value is ready to use.
type specCache struct {
	mu sync.Mutex
	m  map[string]specFacts // by container ID
}

// of returns the facts of the container id's spec; the zero facts when it
// has no spec or the spec does not decode (not cached: tried again).
func (c *specCache) of(id string, spec interface{ GetValue() []byte }) specFacts {
	c.mu.Lock()
	f, ok := c.m[id]
	c.mu.Unlock()
	if ok || spec == nil {
		return f
	}
	var s struct {
		Process *struct {
			User specs.User `json:"user"`
		} `json:"process"`
		Linux *struct {
			CgroupsPath string `json:"cgroupsPath"`
		} `json:"linux"`
	}
	if err := json.Unmarshal(spec.GetValue(), &s); err != nil {
		return specFacts{}
	}
	if s.Linux != nil {
		f.cgroupsPath = s.Linux.CgroupsPath
	}
	if s.Process != nil {
		pu := s.Process.User
		f.user = &ProcessUser{UID: int64(pu.UID), GID: int64(pu.GID)}
		for _, g := range pu.AdditionalGids {
			f.user.SupplementalGroups = append(f.user.SupplementalGroups, int64(g))
		}
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]specFacts{}
	}
	c.m[id] = f
	c.mu.Unlock()
	return f
}

// forget drops the containers not in keep.
func (c *specCache) forget(keep map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.m {
		if !keep[id] {
			delete(c.m, id)
		}
	}
}
