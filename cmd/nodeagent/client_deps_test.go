package main

import (
	"slices"
	"strings"
	"testing"
)

// apiGroups are the only API type packages the binary may link: those of
// internal/kubeclient's scheme. Adding one is a decision (the typed client
// in kubeclient, its group in the scheme, and this list).
var apiGroups = []string{
	"k8s.io/api/core/v1",
	"k8s.io/api/coordination/v1",
	"k8s.io/api/node/v1",
	"k8s.io/api/certificates/v1",
	"k8s.io/api/authentication/v1",
	"k8s.io/api/authorization/v1",
	// CSINode, CSIDriver and VolumeAttachment for the CSI node side
	// (package csi, issue 28).
	"k8s.io/api/storage/v1",
}

// clientGoWhole are client-go's packages that link or register every API
// group: the Clientset and its typed clients (which import the scheme
// package), the scheme, the informer factory, the apply configurations
// and discovery.
var clientGoWhole = []string{
	"k8s.io/client-go/kubernetes",
	"k8s.io/client-go/informers",
	"k8s.io/client-go/applyconfigurations",
	"k8s.io/client-go/discovery",
}

// TestClientLinksOnlyTheAgentsGroups: the agent talks to the API server
// through internal/kubeclient, so neither client-go's Clientset, its
// scheme or informer factory, nor any API group the agent does not use is
// linked into the binary (each would add its types and its init to every
// start of the agent).
func TestClientLinksOnlyTheAgentsGroups(t *testing.T) {
	pkgs, imports := binaryDeps(t, "github.com/nodeagent/nodeagent/internal/kubeclient", "k8s.io/api/core/v1")
	importers := map[string][]string{}
	for _, pkg := range pkgs {
		for _, imp := range imports[pkg] {
			importers[imp] = append(importers[imp], pkg)
		}
	}
	for _, pkg := range pkgs {
		for _, whole := range clientGoWhole {
			if pkg == whole || strings.HasPrefix(pkg, whole+"/") {
				t.Errorf("the binary links %s (imported by %v); use internal/kubeclient", pkg, importers[pkg])
			}
		}
		if strings.HasPrefix(pkg, "k8s.io/api/") && !slices.Contains(apiGroups, pkg) {
			t.Errorf("the binary links API group %s (imported by %v)", pkg, importers[pkg])
		}
	}
}
