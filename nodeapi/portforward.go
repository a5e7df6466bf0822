package nodeapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubelet/pkg/cri/streaming/portforward"

	"github.com/nodeagent/nodeagent/internal/netns"
)

// portForward serves /portForward/{namespace}/{pod} (and kubelet's form
// with the pod UID): each forwarded connection is dialled to
// 127.0.0.1:<port> inside the pod's network namespace (the host's for
// hostNetwork pods).
func (s *Server) portForward(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("pod")
	opts, err := portforward.NewV4Options(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	pod, ok := s.opts.Pods.GetPodByName(ns, name)
	if !ok || uidParam(r) != "" && types.UID(uidParam(r)) != pod.UID {
		http.Error(w, fmt.Sprintf("pod %q does not exist", name), http.StatusNotFound)
		return
	}
	f := forwarder{netnsPath: filepath.Join(s.opts.NetNSDir, string(pod.UID)), hostNetwork: pod.Spec.HostNetwork}
	portforward.ServePortForward(w, r, f, name, pod.UID, opts, s.streamIdleTimeout(), streamCreationTimeout, portforward.SupportedProtocols)
}

// forwarder dials a pod's port for each forwarded connection.
type forwarder struct {
	netnsPath   string
	hostNetwork bool
}

// dialTimeout bounds connecting to the pod's port.
const dialTimeout = 10 * time.Second

func (f forwarder) PortForward(ctx context.Context, _ string, _ types.UID, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
	var conn net.Conn
	dial := func() error {
		var err error
		conn, err = (&net.Dialer{Timeout: dialTimeout}).DialContext(ctx, "tcp4", addr)
		return err
	}
	var err error
	if f.hostNetwork || !netns.IsNetNS(f.netnsPath) {
		if !f.hostNetwork {
			return fmt.Errorf("port forward to %s: the pod has no network namespace", addr)
		}
		err = dial()
	} else {
		// The socket belongs to the namespace it was created in, so it
		// keeps working after the dialling thread is gone.
		err = netns.Do(f.netnsPath, dial)
	}
	if err != nil {
		return fmt.Errorf("port forward to %s in the pod: %w", addr, err)
	}
	defer conn.Close()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, errs[0] = io.Copy(conn, stream)
		// The client finished sending: half-close toward the pod.
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	_, errs[1] = io.Copy(stream, conn)
	// The pod closed its side: stop the other copy too.
	_ = stream.Close()
	_ = conn.Close()
	wg.Wait()
	for _, e := range errs {
		if e != nil && !errors.Is(e, net.ErrClosed) && !errors.Is(e, io.EOF) {
			return fmt.Errorf("port forward to %s: %w", addr, e)
		}
	}
	return nil
}
