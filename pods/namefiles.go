package pods

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/network"
	"github.com/nodeagent/nodeagent/pods/containerspec"
)

// NameSettings are the agent's settings for the pods' name-service files.
type NameSettings struct {
	// ClusterDNS, ClusterDomain and ResolvConf are kubelet's clusterDNS,
	// clusterDomain and resolvConf.
	ClusterDNS    []string
	ClusterDomain string
	ResolvConf    string
	// HostsPath is the node's hosts file, the base of host-network pods'
	// (default /etc/hosts).
	HostsPath string
}

// podNames is what a worker set up of its pod's name service.
type podNames struct {
	hosts, resolv, hostname []byte // the content written (nil: not yet)
	utsHostname             string // "" for host-network pods
}

// setupNameFiles writes the pod's /etc/hosts, /etc/resolv.conf and
// /etc/hostname into its directory as kubelet and containerd compute them
// (network.FilesForPod), rewriting a file only when its content changed
// (a container sees the change: the files are bind-mounted, and written
// in place). kubelet's DNS warnings are recorded on the pod when the
// resolver file changes. An error (a bad hostname or subdomain, an FQDN
// too long, an unreadable host file) keeps the pod's containers from
// starting, as a failed sandbox does in kubelet.
func (w *worker) setupNameFiles(pod *v1.Pod) error {
	s := w.d.names
	settings := network.DNSSettings{ClusterDNS: s.ClusterDNS, ClusterDomain: s.ClusterDomain, ResolvConf: s.ResolvConf}
	if s.ResolvConf != "" {
		b, err := os.ReadFile(s.ResolvConf)
		if err != nil {
			return fmt.Errorf("host resolver file: %w", err)
		}
		settings.HostResolvConf = b
	}
	for _, ip := range w.d.allHostIPs() {
		if p := net.ParseIP(ip); p != nil {
			settings.NodeIPs = append(settings.NodeIPs, p)
		}
	}
	var nodeHosts []byte
	if pod.Spec.HostNetwork {
		path := s.HostsPath
		if path == "" {
			path = "/etc/hosts"
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("node hosts file: %w", err)
		}
		nodeHosts = b
	}
	f, err := network.FilesForPod(pod, w.podIPsOf(pod), settings, nodeHosts)
	if err != nil {
		return err
	}
	if f.Hostname == nil {
		// Host-network pods see the node's hostname (containerd writes
		// os.Hostname() there).
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("node hostname: %w", err)
		}
		f.Hostname = []byte(h + "\n")
	}
	if len(f.ResolvConf) == 0 {
		// Nothing to write (no servers, searches or options): containerd
		// then copies the host's file.
		f.ResolvConf = settings.HostResolvConf
	}
	n := &w.names
	dir := w.podDir()
	for _, file := range []struct {
		name    string
		have    *[]byte
		content []byte
	}{
		{containerspec.HostsFile, &n.hosts, f.Hosts},
		{containerspec.ResolvConfFile, &n.resolv, f.ResolvConf},
		{containerspec.HostnameFile, &n.hostname, f.Hostname},
	} {
		if *file.have != nil && bytes.Equal(*file.have, file.content) {
			continue
		}
		if err := writeInPlace(filepath.Join(dir, file.name), file.content); err != nil {
			return err
		}
		if file.name == containerspec.ResolvConfFile {
			for _, e := range f.Events {
				w.d.event(pod, v1.EventTypeWarning, e.Reason, e.Message)
			}
		}
		*file.have = append([]byte{}, file.content...)
	}
	n.utsHostname = f.UTSHostname
	return nil
}

// writeInPlace writes b to path without replacing the file, so that bind
// mounts of it see the new content (as kubelet writes etc-hosts).
func writeInPlace(path string, b []byte) error {
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, b) {
		return nil
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("pod name-service file: %w", err)
	}
	return nil
}
