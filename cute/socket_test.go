package cute

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/internal/transport"
)

// opaqueConn hides the socket it wraps (no syscall.Conn, no netip
// methods), as a tunnel would: tagging cannot be set on it.
type opaqueConn struct{ net.PacketConn }

// warnings collects what a logger says at Warn and above.
type warnings struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *warnings) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *warnings) lines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.FieldsFunc(w.b.String(), func(r rune) bool { return r == '\n' })
}

func (w *warnings) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// TestPacketTagging (real UDP, IPv4 and IPv6), as netcode's: with
// SocketConfig.PacketTagging both ends' sockets carry DSCP 46 in the IPv4
// TOS or IPv6 traffic class byte and messages cross; off, the byte stays
// 0; on a transport that is not an IP socket, tagging is refused with one
// Warn line per end and the connection works untagged. Both the sockets
// cute opens (Listen, Dial) and the caller's (NewListener,
// Dialer.ListenPacket) are: the byte is read back on the caller's, and
// TestOptionsListenTags (internal/transport) reads it back on the sockets
// Listen and Dial open.
func TestPacketTagging(t *testing.T) {
	for _, f := range families {
		for _, tt := range []struct {
			name    string
			tagging bool
			opaque  bool // hide the socket: tagging cannot be set
			own     bool // cute opens the sockets (Listen, Dial)
			want    int
		}{
			{"on", true, false, false, transport.ExpeditedForwarding},
			{"off", false, false, false, 0},
			{"refused", true, true, false, 0},
			{"own/on", true, false, true, transport.ExpeditedForwarding},
			{"own/off", false, false, true, 0},
		} {
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				if f.network == "udp6" && ipv6Probe() != nil {
					t.Skip("no IPv6 loopback on this machine:", ipv6Probe())
				}
				wrap := func(uc *net.UDPConn) net.PacketConn {
					if tt.opaque {
						return &opaqueConn{uc}
					}
					return uc
				}
				pk, sk := GenerateKeyPair()
				srvLog, cliLog := &warnings{}, &warnings{}
				cfg := &ServerConfig{ApplicationID: testApp, PublicKey: pk, SecretKey: sk,
					Socket: SocketConfig{PacketTagging: tt.tagging}, Logger: srvLog.logger()}
				var (
					l        *Listener
					suc, cuc *net.UDPConn
					err      error
				)
				d := &Dialer{Socket: SocketConfig{PacketTagging: tt.tagging}, Logger: cliLog.logger()}
				if tt.own {
					// transport.TestOptionsListenTags reads back the byte
					// of the sockets Listen and Dial open this way.
					l, err = Listen(f.network, f.addr, cfg)
					require.NoError(t, err)
				} else {
					host, _, _ := net.SplitHostPort(f.addr)
					suc, err = net.ListenUDP(f.network, &net.UDPAddr{IP: net.ParseIP(host)})
					require.NoError(t, err)
					l, err = NewListener(wrap(suc), cfg)
					require.NoError(t, err)
					d.ListenPacket = func(_ context.Context, network, _ string) (net.PacketConn, error) {
						uc, err := net.ListenUDP(network, &net.UDPAddr{IP: suc.LocalAddr().(*net.UDPAddr).IP})
						if err != nil {
							return nil, err
						}
						cuc = uc
						return wrap(uc), nil
					}
				}
				t.Cleanup(func() { l.Close() })
				s := &server{l, sk}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				cli, err := d.DialContext(ctx, s.token(t, 1, nil))
				require.NoError(t, err)
				t.Cleanup(func() { cli.Close() })
				srv, err := l.AcceptConn(ctx)
				require.NoError(t, err)
				t.Cleanup(func() { srv.Close() })
				for name, uc := range map[string]*net.UDPConn{"server": suc, "client": cuc} {
					if tt.own {
						break
					}
					got, err := transport.TrafficClass(uc)
					require.NoError(t, err)
					assert.Equal(t, tt.want, got, "%s socket", name)
				}
				wantWarn := 0
				if tt.opaque {
					wantWarn = 1
				}
				for name, w := range map[string]*warnings{"server": srvLog, "client": cliLog} {
					lines := w.lines()
					require.Len(t, lines, wantWarn, "%s: %q", name, lines)
					for _, m := range lines {
						assert.Contains(t, m, "cute: packet tagging refused", name)
					}
				}
				buf := make([]byte, 64)
				for i := range 3 {
					msg := []byte{'t', byte(i)}
					echo(t, cli, srv, msg, buf)
					echo(t, srv, cli, msg, buf)
				}
			})
		}
	}
}
