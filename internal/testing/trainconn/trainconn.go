// Package trainconn is a test socket that counts its batched writes: a
// UDP socket on transport's batched path (recvmmsg/sendmmsg, GSO trains)
// whose WriteBatch remembers the most datagrams one call carried, so that
// a test can tell whether datagrams sent together left in one system
// call. Being a wrapper, it is not connected (transport.Connect), so a
// dialed Conn on it holds no Writes: each batch is the Conn's own.
package trainconn

import (
	"net"
	"sync"
	"testing"

	"github.com/gonetcode/netcode/internal/transport"
)

// Conn is a UDP socket whose batched writes are counted.
type Conn struct {
	*net.UDPConn
	tc transport.Conn

	mu      sync.Mutex
	largest int // the most datagrams one WriteBatch carried
}

// New opens a Conn on network and addr ("udp4", "127.0.0.1:0").
func New(t testing.TB, network, addr string) *Conn {
	t.Helper()
	uc, err := transport.ListenUDP(network, addr, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Conn{UDPConn: uc, tc: transport.New(uc)}
}

// ReadBatch is transport.Batcher's.
func (c *Conn) ReadBatch(ms []transport.Message) (int, error) { return c.tc.ReadBatch(ms) }

// WriteBatch is transport.Batcher's; it counts.
func (c *Conn) WriteBatch(ms []transport.Message) (int, error) {
	c.mu.Lock()
	c.largest = max(c.largest, len(ms))
	c.mu.Unlock()
	return c.tc.WriteBatch(ms)
}

// LargestBatch is the most datagrams one WriteBatch carried so far.
func (c *Conn) LargestBatch() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.largest
}
