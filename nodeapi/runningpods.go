package nodeapi

import (
	"encoding/json"
	"net/http"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/runtime"
)

// runningPods serves kubelet's /runningpods/: a v1 PodList of the pods
// that have running containers, as the runtime reports them (kubelet's
// GetRunningPods → ToAPIPod): each pod's UID, name and namespace, and
// its running containers' names and images — not the pods' specs.
func (s *Server) runningPods(w http.ResponseWriter, r *http.Request) {
	var cs []runtime.Container
	if s.opts.Containers != nil {
		var err error
		if cs, err = s.opts.Containers.ListContainers(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	running := cs[:0:0]
	for _, c := range cs {
		if c.State == runtime.StateRunning {
			running = append(running, c)
		}
	}
	list := v1.PodList{Items: []v1.Pod{}}
	list.Kind, list.APIVersion = "PodList", "v1"
	for _, rp := range runtime.GroupPods(running) {
		pod := v1.Pod{}
		pod.UID, pod.Name, pod.Namespace = rp.UID, rp.Name, rp.Namespace
		for _, c := range rp.Containers {
			pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: c.Name, Image: c.Image})
		}
		list.Items = append(list.Items, pod)
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(&list); err != nil {
		s.log.Debug("node API: writing /runningpods/", "err", err)
	}
}

// configz serves kubelet's /configz: {"kubeletconfig": ...} (Options.Configz).
func (s *Server) configz(w http.ResponseWriter, _ *http.Request) {
	b, err := s.opts.Configz()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
