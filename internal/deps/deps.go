//go:build tools

// Package deps pins the product's dependencies while the packages that use
// them are being written, so `go mod tidy` keeps them and go.sum stays
// complete. Remove an import once real code uses the package.
package deps

import (
	_ "github.com/containerd/containerd"
	_ "github.com/containerd/containerd/namespaces"
	_ "github.com/coreos/go-systemd/v22/daemon"
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/prometheus/client_golang/prometheus/testutil"
	_ "k8s.io/apimachinery/pkg/util/validation/field"
	_ "k8s.io/client-go/informers"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/kubernetes/fake"
	_ "k8s.io/client-go/rest"
	_ "k8s.io/client-go/testing"
	_ "k8s.io/client-go/tools/cache"
	_ "k8s.io/client-go/tools/clientcmd"
	_ "k8s.io/client-go/tools/record"
	_ "k8s.io/component-base/featuregate"
	_ "k8s.io/component-helpers/node/util"
	_ "k8s.io/klog/v2"
	_ "k8s.io/kubelet/config/v1beta1"
	_ "k8s.io/utils/clock"
	_ "k8s.io/utils/clock/testing"
	_ "sigs.k8s.io/yaml"
)
