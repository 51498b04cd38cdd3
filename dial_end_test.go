package netcode

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/client"
	"github.com/gonetcode/netcode/token"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWriteAsTheConnEnds: the goroutine that moves a dialed Conn's core out
// of Connected (here the timer, on a timeout; the reader does the same on
// the server's disconnect) ends the Conn only after the core's call. A
// Write in between found the core not connected and no end yet, and failed
// with net.ErrClosed, which only Close may cause: TestSoakNetsim's oracle
// caught one under load, when a listener restart's disconnect arrived. It
// must fail with the end the core's state means, as the Conn then ends.
func TestWriteAsTheConnEnds(t *testing.T) {
	key := crypto.Key{0xaa, 0xbb, 0xcc, 4, 5, 6}
	const protocolID = 0x0102030405060708
	for _, f := range []struct{ network, addr string }{{"udp4", "127.0.0.1:0"}, {"udp6", "[::1]:0"}} {
		t.Run(f.network, func(t *testing.T) {
			if f.network == "udp6" {
				if pc, err := net.ListenPacket("udp6", f.addr); err != nil {
					t.Skipf("no IPv6 loopback on this machine: %v", err)
				} else {
					pc.Close()
				}
			}
			l, err := Listen(f.network, f.addr, &ServerConfig{ProtocolID: protocolID, PrivateKey: key})
			require.NoError(t, err)
			defer l.Close()
			p := token.Params{ProtocolID: protocolID, ClientID: 1, PrivateKey: key, ExpireSeconds: 30, TimeoutSeconds: 5,
				ServerAddrs: []netip.AddrPort{l.AddrPort()}}
			tok, err := token.Generate(&p)
			require.NoError(t, err)
			c, err := Dial(tok)
			require.NoError(t, err)
			defer c.Close()
			dc := dialed(t, c)

			// The timer's update, stopped between the core's call and act:
			// the core timed out, the Conn has not ended yet.
			out := new(client.Output)
			dc.turn <- struct{}{}
			dc.core.Update(time.Now().Add(time.Hour), out)
			<-dc.turn
			require.Equal(t, client.ConnectionTimedOut, dc.core.State())
			require.NoError(t, c.Err(), "the Conn has not ended yet")

			_, err = c.Write([]byte("late"))
			assert.ErrorIs(t, err, ErrConnectionTimedOut, "a Write before the Conn ends")
			assert.False(t, errors.Is(err, net.ErrClosed), "net.ErrClosed without Close: %v", err)
			_, err = c.m.WriteBatch([][]byte{[]byte("late")})
			assert.ErrorIs(t, err, ErrConnectionTimedOut, "a batch before the Conn ends")

			dc.act(out) // the update goes on: the Conn ends
			_, err = c.Write([]byte("later"))
			assert.ErrorIs(t, err, ErrConnectionTimedOut, "a Write after the Conn ended")
			_, err = c.Read(make([]byte, MaxPayloadBytes))
			assert.ErrorIs(t, err, ErrConnectionTimedOut)
		})
	}
}

// dialed returns the dialConn behind a dialed Conn.
func dialed(t *testing.T, c *Conn) *dialConn {
	t.Helper()
	switch ep := c.m.Endpoint().(type) {
	case pullEndpoint:
		return ep.msgEndpoint.ep.(*dialConn)
	case msgEndpoint:
		return ep.ep.(*dialConn)
	}
	t.Fatalf("a dialed Conn's endpoint is a %T", c.m.Endpoint())
	return nil
}
