package cute

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/gonetcode/netcode/internal/testing/netsim"
	"github.com/gonetcode/netcode/internal/testing/stacks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLayerNeedsNoGoroutine: the client/server layer runs on the socket
// engine's timer (engine.Due), not on a goroutine per Conn: with layered
// Conns on both ends, one accepted and read, one never accepted, no
// goroutine of the layer exists once they are idle (an idle Conn costs no
// stack), the read turn feeds the layers (nothing of the layer reads the
// socket), and the timer still runs each layer's Update: the reliable
// messages, the one read and the one nobody reads, are acknowledged.
// Before, a pump goroutine per Conn waited in a Read of the bare Conn.
func TestLayerNeedsNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const latency = 10 * time.Millisecond
		nw := netsim.New(1, netsim.Config{Latency: latency})
		defer nw.Close()
		s := newSimServer(t, nw)
		defer s.Close()
		var clients []*Conn
		for i := range 2 { // the first is accepted and read; the second never is
			c := s.dial(t, nw, i)
			defer c.Close()
			clients = append(clients, c)
		}
		sc, err := s.Accept()
		require.NoError(t, err)
		defer sc.Close()
		for i, c := range clients {
			_, err := c.Send([]byte{byte(i)}, true)
			require.NoError(t, err)
		}
		b := make([]byte, 16)
		n, err := sc.Read(b)
		require.NoError(t, err)
		assert.Equal(t, []byte{0}, b[:n], "the read turn fed the accepted Conn's layer")

		time.Sleep(10 * latency) // every layer's Update has run when due
		synctest.Wait()
		assert.Zero(t, stacks.Count("cute.(*messages)"), "a goroutine of the layer while the Conns are idle")
		for i, c := range clients {
			c.ml.mu.Lock()
			unacked := c.ml.t.Unacked()
			c.ml.mu.Unlock()
			assert.Zero(t, unacked, "client %d's reliable message is not acknowledged", i)
		}
	})
}
