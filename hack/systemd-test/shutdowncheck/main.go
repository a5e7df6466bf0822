// Command shutdowncheck drives hack/systemd-test/shutdown.sh (graceful node
// shutdown under a real systemd) with the admin credentials in $KUBECONFIG:
//
//	shutdowncheck pod NODE NAME DIR IMAGE    # run a pod on NODE that records its end in DIR; wait until Running
//	shutdowncheck watch NODE NAME TIMEOUT    # print the Node's Ready condition and the pod's status as they change
//	shutdowncheck delete NAME                # delete the pod (zero grace)
//
// The pod's container records "started", its preStop hook "prestop", and
// its SIGTERM handler "sigterm" then, 3 seconds later, "exit" in DIR/log,
// each with the time in seconds since the epoch. watch prints one line per
// change, prefixed by the seconds since it started, until TIMEOUT or until
// the Node's Ready condition and the pod's status both show the shutdown.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const namespace = "default"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "shutdowncheck:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 2 {
		return errors.New("usage: shutdowncheck pod|watch|delete ...")
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
	switch {
	case args[0] == "pod" && len(args) == 5:
		return runPod(ctx, cs, args[1], args[2], args[3], args[4])
	case args[0] == "watch" && len(args) == 4:
		timeout, err := time.ParseDuration(args[3])
		if err != nil {
			return err
		}
		return watch(ctx, cs, args[1], args[2], timeout)
	case args[0] == "delete" && len(args) == 2:
		err := cs.CoreV1().Pods(namespace).Delete(ctx, args[1], *metav1.NewDeleteOptions(0))
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return fmt.Errorf("bad arguments %q", args)
}

// script is the container's program: a SIGTERM handler that takes 3s.
const script = `log() { echo "$1 $(date +%s)" >> /evidence/log; }
trap 'log sigterm; sleep 3; log exit; exit 0' TERM
log started
while true; do sleep 0.2; done`

func runPod(ctx context.Context, cs kubernetes.Interface, node, name, dir, image string) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{
			NodeName: node,
			// The agent runs in the container and the pod on the host's
			// containerd: it cannot hand the host's runc namespace files
			// it holds under the container's /run, so the pod uses the
			// host's network and IPC namespaces.
			HostNetwork:                   true,
			HostIPC:                       true,
			AutomountServiceAccountToken:  new(bool),
			TerminationGracePeriodSeconds: ptr[int64](30),
			RestartPolicy:                 corev1.RestartPolicyAlways,
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Volumes: []corev1.Volume{{Name: "evidence", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir},
			}}},
			Containers: []corev1.Container{{
				Name:            "graceful",
				Image:           image,
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{"sh", "-c", script},
				VolumeMounts:    []corev1.VolumeMount{{Name: "evidence", MountPath: "/evidence"}},
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
					Exec: &corev1.ExecAction{Command: []string{"sh", "-c", `echo "prestop $(date +%s)" >> /evidence/log`}},
				}},
			}},
		},
	}
	if _, err := cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return err
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		p, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready {
			fmt.Printf("pod %s running on %s\n", name, node)
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return err
			}
			return fmt.Errorf("pod %s not running after 90s: phase %s reason %q message %q statuses %+v", name, p.Status.Phase, p.Status.Reason, p.Status.Message, p.Status.ContainerStatuses)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// watch polls every 100ms (the container's API server is local) and prints
// each change of the Node's Ready condition and of the pod's status.
func watch(ctx context.Context, cs kubernetes.Interface, node, name string, timeout time.Duration) error {
	start := time.Now()
	var lastNode, lastPod string
	nodeDone, podDone := false, false
	for time.Since(start) < timeout {
		if n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err == nil {
			for _, c := range n.Status.Conditions {
				if c.Type != corev1.NodeReady {
					continue
				}
				s := fmt.Sprintf("node Ready=%s reason=%s message=%q", c.Status, c.Reason, c.Message)
				if s != lastNode {
					fmt.Printf("%6.2f %s\n", time.Since(start).Seconds(), s)
					lastNode = s
				}
				nodeDone = c.Status == corev1.ConditionFalse && c.Message == "node is shutting down"
			}
		}
		if p, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
			s := fmt.Sprintf("pod phase=%s reason=%s message=%q", p.Status.Phase, p.Status.Reason, p.Status.Message)
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.DisruptionTarget {
					s += fmt.Sprintf(" DisruptionTarget=%s/%s", c.Status, c.Reason)
				}
			}
			for _, c := range p.Status.ContainerStatuses {
				if t := c.State.Terminated; t != nil {
					s += fmt.Sprintf(" container=terminated/%s/exit%d", t.Reason, t.ExitCode)
				}
			}
			if s != lastPod {
				fmt.Printf("%6.2f %s\n", time.Since(start).Seconds(), s)
				lastPod = s
			}
			podDone = p.Status.Phase == corev1.PodFailed
		}
		if nodeDone && podDone {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("no shutdown seen within %v (node done %v, pod done %v)", timeout, nodeDone, podDone)
}

func ptr[T any](v T) *T { return &v }
