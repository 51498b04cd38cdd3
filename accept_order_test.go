package netcode_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
)

// TestAcceptAfterConfirm: a Conn reaches Accept only once the keep-alive
// that tells the client it is connected is on its way, so what the server
// does at once with a fresh Conn cannot overtake it: a Write right after
// Accept is read by the client (a payload before the keep-alive is dropped
// by a client still in the handshake), and a Close right after Accept lets
// the Dial succeed and the client read io.EOF (a disconnect before it fails
// the Dial). Over real UDP, IPv4 and IPv6, many times, since the overtaking
// was a race between the reader and the accepting goroutine.
func TestAcceptAfterConfirm(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			for _, closeAtOnce := range []bool{false, true} {
				l := listen(t, f.network, f.addr, nil)
				go func() {
					for {
						c, err := l.Accept()
						if err != nil {
							return
						}
						if closeAtOnce {
							c.Close()
						} else {
							c.Write([]byte("first"))
						}
					}
				}()
				for i := range 25 {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					c, err := (&netcode.Dialer{}).DialContext(ctx, mint(t, l.Addr(), withClientID(uint64(i+1))))
					cancel()
					require.NoError(t, err, "dial %d (close at once: %v)", i, closeAtOnce)
					require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
					buf := make([]byte, 16)
					n, err := c.Read(buf)
					if closeAtOnce {
						require.ErrorIs(t, err, io.EOF, "dial %d", i)
					} else {
						require.NoError(t, err, "dial %d: the first payload", i)
						require.Equal(t, "first", string(buf[:n]))
					}
					c.Close()
				}
			}
		})
	}
}
