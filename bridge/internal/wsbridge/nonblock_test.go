//go:build unix

package wsbridge

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tcpPair returns the two ends of a TCP connection on network's loopback;
// the sending end's buffer is small, so that a peer that does not read
// fills it soon.
func tcpPair(t *testing.T, network, addr string) (send *net.TCPConn, recv net.Conn) {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil && network == "tcp6" {
		t.Skipf("no IPv6 loopback on this machine: %v", err)
	}
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	c, err := net.Dial(network, ln.Addr().String())
	require.NoError(t, err)
	r, ok := <-accepted
	require.True(t, ok, "accept failed")
	send = c.(*net.TCPConn)
	require.NoError(t, send.SetWriteBuffer(4096))
	require.NoError(t, r.(*net.TCPConn).SetReadBuffer(4096))
	t.Cleanup(func() { send.Close(); r.Close() })
	return send, r
}

// TestNonblockingWrites writes messages between StartNonblocking and
// EndNonblocking to a peer that does not read, over real TCP (IPv4 and
// IPv6): none blocks; once the socket is full the rest is left (and
// StartNonblocking refuses until it is sent); Flush and a later blocking
// write send what was left first, so the peer reads every byte in order.
func TestNonblockingWrites(t *testing.T) {
	for _, fam := range []struct{ network, addr string }{{"tcp4", "127.0.0.1:0"}, {"tcp6", "[::1]:0"}} {
		for _, end := range []string{"flush", "blocking write"} {
			t.Run(fam.network+"/"+end, func(t *testing.T) {
				send, recv := tcpPair(t, fam.network, fam.addr)
				c := newBatchConn(send)
				require.NotNil(t, c.nb, "a plain TCP connection writes without blocking")
				var want []byte
				msg := make([]byte, 1300)
				left := false
				for i := 0; !left; i++ {
					require.Less(t, i, 100000, "the socket never filled")
					for j := range msg {
						msg[j] = byte(i + j)
					}
					require.True(t, c.StartNonblocking(), "message %d", i)
					n, err := c.Write(msg)
					require.NoError(t, err)
					require.Equal(t, len(msg), n)
					left = c.EndNonblocking()
					want = append(want, msg...)
				}
				assert.False(t, c.StartNonblocking(), "bytes left: no write without blocking until they are sent")

				got := make(chan []byte, 1)
				go func() {
					b, _ := io.ReadAll(recv)
					got <- b
				}()
				last := []byte("the last message")
				switch end {
				case "flush":
					require.NoError(t, c.Flush())
					_, err := c.Write(last)
					require.NoError(t, err)
				case "blocking write":
					_, err := c.Write(last)
					require.NoError(t, err)
				}
				want = append(want, last...)
				assert.Nil(t, c.left, "what was left went back to the pool")
				assert.True(t, c.StartNonblocking(), "nothing left: writes without blocking again")
				c.EndNonblocking()
				require.NoError(t, send.CloseWrite())
				select {
				case b := <-got:
					require.True(t, bytes.Equal(want, b), "the peer read %d bytes, want %d, in order", len(b), len(want))
				case <-time.After(10 * time.Second):
					t.Fatal("the peer did not read everything")
				}
			})
		}
	}
}

// TestNonblockingRefused: where writes cannot avoid blocking (not a plain
// TCP connection) or while batching, StartNonblocking refuses.
func TestNonblockingRefused(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	assert.False(t, newBatchConn(a).StartNonblocking(), "not a TCP connection")

	send, _ := tcpPair(t, "tcp4", "127.0.0.1:0")
	c := newBatchConn(send)
	c.Hold()
	assert.False(t, c.StartNonblocking(), "batching")
	require.NoError(t, c.Flush())
	assert.True(t, c.StartNonblocking())
	assert.False(t, c.EndNonblocking())
}
