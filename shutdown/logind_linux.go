package shutdown

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/godbus/dbus/v5"
)

const (
	logindDest      = "org.freedesktop.login1"
	logindPath      = dbus.ObjectPath("/org/freedesktop/login1")
	logindInterface = "org.freedesktop.login1.Manager"
	systemdDest     = "org.freedesktop.systemd1"
	systemdPath     = dbus.ObjectPath("/org/freedesktop/systemd1")
	logindUnit      = "systemd-logind.service"
)

// busLogind is Logind over a private system bus connection, authenticated
// as go-systemd's login1 does (EXTERNAL with the numeric uid).
type busLogind struct {
	conn *dbus.Conn
}

// SystemBus connects to logind on the system bus
// (DBUS_SYSTEM_BUS_ADDRESS, default /run/dbus/system_bus_socket).
func SystemBus() (Logind, error) {
	conn, err := dbus.SystemBusPrivate()
	if err != nil {
		return nil, err
	}
	if err := conn.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("system bus authentication: %w", err)
	}
	if err := conn.Hello(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("system bus hello: %w", err)
	}
	return &busLogind{conn: conn}, nil
}

func (b *busLogind) logind() dbus.BusObject { return b.conn.Object(logindDest, logindPath) }

func (b *busLogind) InhibitDelayMax() (time.Duration, error) {
	v, err := b.logind().GetProperty(logindInterface + ".InhibitDelayMaxUSec")
	if err != nil {
		return 0, err
	}
	us, ok := v.Value().(uint64)
	if !ok {
		return 0, fmt.Errorf("InhibitDelayMaxUSec is a %T, not a uint64", v.Value())
	}
	return time.Duration(us) * time.Microsecond, nil
}

func (b *busLogind) Inhibit(what, who, why, mode string) (io.Closer, error) {
	var fd dbus.UnixFD
	if err := b.logind().Call(logindInterface+".Inhibit", 0, what, who, why, mode).Store(&fd); err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "logind-inhibit"), nil
}

// ReloadLogind sends SIGHUP to systemd-logind through systemd, as kubelet
// does; logind reads logind.conf and its drop-ins again.
func (b *busLogind) ReloadLogind() error {
	return b.conn.Object(systemdDest, systemdPath).Call("org.freedesktop.systemd1.Manager.KillUnit", 0, logindUnit, "all", int32(1)).Err
}

func (b *busLogind) PrepareForShutdown() (<-chan bool, error) {
	if err := b.conn.AddMatchSignal(
		dbus.WithMatchObjectPath(logindPath),
		dbus.WithMatchInterface(logindInterface),
		dbus.WithMatchMember("PrepareForShutdown"),
	); err != nil {
		return nil, err
	}
	// godbus closes the channel when the connection ends. Signals are
	// rare: a small buffer is plenty, and godbus drops none while the
	// reader below keeps up.
	sigs := make(chan *dbus.Signal, 4)
	b.conn.Signal(sigs)
	out := make(chan bool, 1)
	go func() {
		defer close(out)
		for s := range sigs {
			if s.Name != logindInterface+".PrepareForShutdown" || len(s.Body) == 0 {
				continue
			}
			if v, ok := s.Body[0].(bool); ok {
				out <- v
			}
		}
	}()
	return out, nil
}

func (b *busLogind) Close() error { return b.conn.Close() }
