package network

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/containernetworking/cni/libcni"
)

// Kubelet's and containerd's words for a node whose network is not ready
// (kubelet pkg/kubelet/kubelet.go updateRuntimeUp, containerd
// pkg/cri/server/status.go, go-cni ErrCNINotInitialized).
const (
	// NotReadyMessage is the Ready condition's message without a usable
	// CNI configuration.
	NotReadyMessage = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"
	// NetworkNotReadyReason is the reason of the pod event kubelet emits
	// when a pod that needs the network waits for it.
	NetworkNotReadyReason = "NetworkNotReady"
	// NetworkNotReadyErrorMsg prefixes that event's message:
	// "network is not ready: " + Status().Error().
	NetworkNotReadyErrorMsg = "network is not ready"
)

// Sentinels for errors.Is.
var (
	// ErrNotReady: no usable CNI configuration.
	ErrNotReady = errors.New("network plugin not ready")
	// ErrInvalidOptions: a pod's network options (annotations, ports,
	// requested IPs) are invalid.
	ErrInvalidOptions = errors.New("invalid pod network options")
	// ErrCheckNotSupported: the network's cniVersion has no CHECK.
	ErrCheckNotSupported = errors.New("CNI CHECK not supported")
)

// NotReadyError is Status's error. Error() is kubelet's message; Detail
// says why (for logs and troubleshooting).
type NotReadyError struct {
	Detail string
}

func (e *NotReadyError) Error() string        { return NotReadyMessage }
func (e *NotReadyError) Is(target error) bool { return target == ErrNotReady }

// confExtensions are the file extensions of network configurations, as
// kubelet and containerd read them.
var confExtensions = []string{".conf", ".conflist", ".json"}

// loaded is the outcome of one scan of the configuration directory.
type loaded struct {
	list *libcni.NetworkConfigList // nil: not ready
	file string
	// detail says why nothing is usable, or which files were skipped.
	detail string
}

// validator is the part of libcni a scan needs (the binaries' check).
type validator interface {
	ValidateNetworkList(ctx context.Context, net *libcni.NetworkConfigList) ([]string, error)
	GetStatusNetworkList(ctx context.Context, net *libcni.NetworkConfigList) error
}

// loadConfig picks the first usable network configuration of dir in
// lexical order: one that parses, has plugins, and whose plugins exist
// and support its version (and answer STATUS, for CNI 1.1 networks).
func loadConfig(ctx context.Context, v validator, dir string) loaded {
	files, err := libcni.ConfFiles(dir, confExtensions)
	if err != nil {
		return loaded{detail: fmt.Sprintf("cannot read CNI configuration directory %s: %v", dir, err)}
	}
	sort.Strings(files)
	if len(files) == 0 {
		return loaded{detail: fmt.Sprintf("no network config found in %s", dir)}
	}
	var skipped []string
	for _, f := range files {
		list, err := readConfList(f)
		if err == nil {
			_, err = v.ValidateNetworkList(ctx, list)
		}
		if err == nil {
			err = v.GetStatusNetworkList(ctx, list)
		}
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", filepath.Base(f), err))
			continue
		}
		l := loaded{list: list, file: f}
		if len(skipped) > 0 {
			l.detail = "skipped " + strings.Join(skipped, "; ")
		}
		return l
	}
	return loaded{detail: fmt.Sprintf("no valid network config in %s: %s", dir, strings.Join(skipped, "; "))}
}

// readConfList reads a .conflist, or a single-plugin .conf/.json as a list
// of one.
func readConfList(file string) (*libcni.NetworkConfigList, error) {
	var list *libcni.NetworkConfigList
	if filepath.Ext(file) == ".conflist" {
		l, err := libcni.ConfListFromFile(file)
		if err != nil {
			return nil, err
		}
		list = l
	} else {
		conf, err := libcni.ConfFromFile(file)
		if err != nil {
			return nil, err
		}
		if list, err = libcni.ConfListFromConf(conf); err != nil {
			return nil, err
		}
	}
	if list.Name == "" {
		return nil, errors.New("the network has no name")
	}
	if len(list.Plugins) == 0 {
		return nil, errors.New("the network has no plugins")
	}
	return list, nil
}
