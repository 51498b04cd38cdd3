package transport

import (
	"context"
	"fmt"
	"log/slog"
	"net"
)

// Options is how a dialect's SocketConfig (netcode.SocketConfig,
// cute.SocketConfig) sets up the sockets of a Listener or a dialed Conn:
// the one mechanism behind both, so that each dialect's type only names
// the settings.
type Options struct {
	// Buffer is the receive and send buffer size each socket asks for;
	// 0 means DefaultSocketBuffer (on a socket Listen opens) or leaves a
	// caller's socket alone (Apply).
	Buffer int
	// PacketTagging marks every packet sent with ExpeditedForwarding.
	PacketTagging bool
	// Control is called with each socket Listen opens before it is bound.
	Control Control
	// Log is where a refused tagging is said, at Warn; nil is silent.
	Log *slog.Logger
	// Dialect names the package in errors and logs: "netcode" or "cute".
	Dialect string
}

// Listen opens n sockets on address as ListenUDPShards does, with o's
// buffer and Control hook, and tags each if o asks.
func (o *Options) Listen(network, address string, n int) ([]*net.UDPConn, error) {
	ucs, err := ListenUDPShards(network, address, n, o.Buffer, o.Control)
	if err != nil {
		return nil, err
	}
	if o.PacketTagging {
		for _, uc := range ucs {
			o.Tag(uc)
		}
	}
	return ucs, nil
}

// ListenServer opens a Listener's read shards on address as Listen does,
// n sockets where SO_REUSEPORT allows (one elsewhere), and makes the
// Listener of them with serve, closing them if serve fails: the Listen of
// netcode's and cute's.
func ListenServer[L any](o *Options, network, address string, n int, serve func([]net.PacketConn) (L, error)) (L, error) {
	if n > 1 && !ReusePortSupported {
		n = 1 // SO_REUSEPORT read shards are Linux's; one reader elsewhere
	}
	var l L
	ucs, err := o.Listen(network, address, n)
	if err != nil {
		return l, err
	}
	pcs := make([]net.PacketConn, len(ucs))
	for i, uc := range ucs {
		pcs[i] = uc
	}
	if l, err = serve(pcs); err != nil {
		for _, pc := range pcs {
			pc.Close()
		}
	}
	return l, err
}

// ListenPacket is a Dialer's ListenPacket hook (netcode's, cute's): it
// opens the datagram transport a dialed Conn uses instead of a UDP socket.
type ListenPacket = func(ctx context.Context, network, localAddr string) (net.PacketConn, error)

// Dial opens a dialed Conn's socket on network: the caller's transport
// from listenPacket, set up by Apply (closed if Apply refuses it), or,
// with listenPacket nil, a UDP socket on laddr (":0" if empty) set up as
// Listen sets one up.
func (o *Options) Dial(ctx context.Context, network, laddr string, listenPacket ListenPacket) (net.PacketConn, error) {
	if listenPacket != nil {
		if err := o.CallerTransport(); err != nil {
			return nil, err
		}
		pc, err := listenPacket(ctx, network, laddr)
		if err != nil {
			return nil, err
		}
		if err := o.Apply(pc); err != nil {
			pc.Close()
			return nil, err
		}
		return pc, nil
	}
	if laddr == "" {
		laddr = ":0"
	}
	ucs, err := o.Listen(network, laddr, 1)
	if err != nil {
		return nil, err
	}
	return ucs[0], nil
}

// CallerTransport refuses a Control hook for a transport the caller
// opened (NewListener's, or a Dialer's ListenPacket's): the hook could
// never run. It is nil without one.
func (o *Options) CallerTransport() error {
	if o.Control == nil {
		return nil
	}
	return fmt.Errorf("%s: SocketConfig.Control applies only to sockets %[1]s opens, not to NewListener's or Dialer.ListenPacket's transport", o.Dialect)
}

// Apply applies the settings that can apply to a transport the caller
// opened, pc: Buffer (a *net.UDPConn only; 0 leaves its buffers alone)
// and PacketTagging. It refuses Control (CallerTransport).
func (o *Options) Apply(pc net.PacketConn) error {
	if err := o.CallerTransport(); err != nil {
		return err
	}
	if o.Buffer > 0 {
		uc, ok := pc.(*net.UDPConn)
		if !ok {
			return fmt.Errorf("%s: SocketConfig.Buffer needs a UDP socket; the transport is a %T", o.Dialect, pc)
		}
		SetBuffers(uc, o.Buffer)
	}
	if o.PacketTagging {
		o.Tag(pc)
	}
	return nil
}

// Tag turns packet tagging on for pc, and logs the operating system's
// refusal at Warn, as the reference does: the socket works untagged.
func (o *Options) Tag(pc net.PacketConn) {
	if err := SetTrafficClass(pc, ExpeditedForwarding); err != nil && o.Log != nil {
		o.Log.Warn(o.Dialect+": packet tagging refused; packets go untagged", "addr", pc.LocalAddr().String(), "err", err)
	}
}
