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

// TestPumpDoesNotPull: the client/server layer's pump, one per Conn
// (accepted or not), never reads the socket itself: the read turn hands
// the layer its PAYLOADs. A pump that pulled became the Listener's socket
// reader whenever it was the one Read waiting, for a payload it could only
// hand on, and a pump that stopped (its Conn ended) left the socket to the
// reader's grace with other peers' datagrams waiting (TestDialWakeUpNotLost
// saw each dial take 40 ms more).
func TestPumpDoesNotPull(t *testing.T) {
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

		time.Sleep(10 * latency) // every pump is waiting for its next due time
		synctest.Wait()
		assert.Equal(t, 4, stacks.Count("cute.(*messages).pump"), "a pump per Conn, both ends")
		assert.Zero(t, stacks.Count("cute.(*messages).pump", "engine.(*Reader).pull"), "a pump reads the socket")
	})
}
