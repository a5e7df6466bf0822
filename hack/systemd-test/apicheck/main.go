// Command apicheck answers hack/test-systemd.sh's questions about the cluster
// with the admin credentials in $KUBECONFIG:
//
//	apicheck registered NODE           # Node and its Lease exist right now
//	apicheck ready NODE TIMEOUT        # wait until the Node is Ready=True
//	apicheck renewed NODE SINCE TIMEOUT # wait until the Lease is renewed after SINCE (RFC 3339)
//	apicheck delete NODE               # delete the Node and its Lease
//	apicheck nodelogs NODE QUERY [CODE] # GET /api/v1/nodes/NODE/proxy/logs/?QUERY:
//	                                    # the body on stdout, exit 1 unless the
//	                                    # status is CODE (default 200)
//
// It exits non-zero with a message on stderr when the answer is no.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "apicheck:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 2 {
		return errors.New("usage: apicheck registered|ready|delete NODE [TIMEOUT]")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		return fmt.Errorf("admin kubeconfig ($KUBECONFIG): %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	node := args[1]
	switch args[0] {
	case "registered":
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("node: %w", err)
		}
		l, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("lease: %w", err)
		}
		fmt.Printf("node %s created %s, lease holder %s renewed %s\n", n.Name,
			n.CreationTimestamp.UTC().Format(time.RFC3339), deref(l.Spec.HolderIdentity), renewTime(l))
		return nil
	case "ready":
		if len(args) != 3 {
			return errors.New("usage: apicheck ready NODE TIMEOUT")
		}
		timeout, err := time.ParseDuration(args[2])
		if err != nil {
			return err
		}
		start := time.Now()
		var last string
		for {
			n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			switch {
			case err != nil:
				last = err.Error()
			default:
				last = "no Ready condition"
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady {
						last = fmt.Sprintf("Ready=%s reason=%s message=%q", c.Status, c.Reason, c.Message)
						if c.Status == corev1.ConditionTrue {
							fmt.Printf("node %s Ready after %s\n", node, time.Since(start).Round(100*time.Millisecond))
							return nil
						}
					}
				}
			}
			if time.Since(start) > timeout {
				return fmt.Errorf("node %s not Ready after %s: %s", node, timeout, last)
			}
			time.Sleep(250 * time.Millisecond)
		}
	case "renewed":
		if len(args) != 4 {
			return errors.New("usage: apicheck renewed NODE SINCE TIMEOUT")
		}
		since, err := time.Parse(time.RFC3339Nano, args[2])
		if err != nil {
			return err
		}
		timeout, err := time.ParseDuration(args[3])
		if err != nil {
			return err
		}
		start := time.Now()
		var last string
		for {
			l, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
			switch {
			case err != nil:
				last = err.Error()
			case l.Spec.RenewTime != nil && l.Spec.RenewTime.After(since):
				fmt.Printf("lease %s renewed at %s, %s after %s\n", node, renewTime(l),
					l.Spec.RenewTime.Sub(since).Round(time.Millisecond), since.Format(time.RFC3339Nano))
				return nil
			default:
				last = "last renewed " + renewTime(l)
			}
			if time.Since(start) > timeout {
				return fmt.Errorf("lease %s not renewed after %s within %s: %s", node, args[2], timeout, last)
			}
			time.Sleep(250 * time.Millisecond)
		}
	case "nodelogs":
		return nodeLogs(ctx, cfg, node, args[2:])
	case "delete":
		if err := cs.CoordinationV1().Leases("kube-node-lease").Delete(ctx, node, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err := cs.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	}
	return fmt.Errorf("unknown command %q", args[0])
}

// nodeLogs queries the node's /logs/ through the API server's node proxy,
// as `kubectl get --raw /api/v1/nodes/NODE/proxy/logs/?QUERY` does.
func nodeLogs(ctx context.Context, cfg *rest.Config, node string, args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return errors.New("usage: apicheck nodelogs NODE QUERY [CODE]")
	}
	want := http.StatusOK
	if len(args) == 2 {
		var err error
		if want, err = strconv.Atoi(args[1]); err != nil {
			return err
		}
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	u := strings.TrimSuffix(cfg.Host, "/") + "/api/v1/nodes/" + url.PathEscape(node) + "/proxy/logs/?" + args[0]
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	_, _ = os.Stdout.Write(body)
	if resp.StatusCode != want {
		return fmt.Errorf("GET %s: status %d, want %d: %.500s", u, resp.StatusCode, want, body)
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return "<none>"
	}
	return *s
}

func renewTime(l *coordinationv1.Lease) string {
	if l.Spec.RenewTime == nil {
		return "never"
	}
	return l.Spec.RenewTime.UTC().Format(time.RFC3339Nano)
}
