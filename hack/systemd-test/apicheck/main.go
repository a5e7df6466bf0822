// Command apicheck answers hack/test-systemd.sh's questions about the cluster
// with the admin credentials in $KUBECONFIG:
//
//	apicheck registered NODE           # Node and its Lease exist right now
//	apicheck ready NODE TIMEOUT        # wait until the Node is Ready=True
//	apicheck renewed NODE SINCE TIMEOUT # wait until the Lease is renewed after SINCE (RFC 3339)
//	apicheck delete NODE               # delete the Node and its Lease
//
// It exits non-zero with a message on stderr when the answer is no.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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
