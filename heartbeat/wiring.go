package heartbeat

import (
	"net"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
)

// NewClientConfigs wires an agent's API connections for the heartbeat, as
// kubelet does: main (the config the agent's main client will be built
// from) gets a dialer that tracks its connections, the heartbeat gets its
// own config and connection (NewClientConfig), and onRepeatedFailure, to
// pass as Options.OnRepeatedFailure, closes the heartbeat's idle
// connections and every one of the main client's, watches included: a
// watch or a status write on a silently dead connection would otherwise
// wait for HTTP/2's 30s+15s health check. Call it before building the
// main client from main; cmd/nodeagent and the fleet simulator share it.
func NewClientConfigs(main *rest.Config, renewInterval time.Duration) (hb *rest.Config, onRepeatedFailure func(), err error) {
	dialer := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	main.Dial = dialer.DialContext
	hb, closeIdle, err := NewClientConfig(main, renewInterval)
	if err != nil {
		return nil, nil, err
	}
	return hb, func() { closeIdle(); dialer.CloseAll() }, nil
}
