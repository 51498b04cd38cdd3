package cute

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/gonetcode/netcode/cute/internal/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWriteAsTheConnEnds: the read loop moves a dialed Conn's core out of
// Connected in Receive (the server's DISCONNECT) and ends the Conn only
// after, in act. A Write in between found the core not connected and no
// end yet, and failed with net.ErrClosed, which only Close may cause (the
// root package's TestSoakNetsim caught the same race there). It must fail
// with the end the core's state means, as the Conn then ends. The test
// makes the core's state final outside the Conn's goroutines (a timeout,
// by an Update an hour on) and leaves the Conn unended, as that window does.
func TestWriteAsTheConnEnds(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			s := listen(t, f.network, f.addr, bare)
			cli, _ := pair(t, s, 1)
			dc := cli.m.Endpoint().(*dialConn)

			var out core.ClientOutput
			dc.turn.Wait()
			dc.core.Update(time.Now().Add(time.Hour), &out)
			dc.turn.Give()
			require.Equal(t, core.ConnectionTimedOut, dc.core.State())
			require.NoError(t, cli.m.Err(), "the Conn has not ended yet")

			_, err := cli.Write([]byte("late"))
			assert.ErrorIs(t, err, ErrConnectionTimedOut, "a Write before the Conn ends")
			assert.False(t, errors.Is(err, net.ErrClosed), "net.ErrClosed without Close: %v", err)

			dc.turn.Wait()
			dc.act(&out) // the Conn ends
			dc.turn.Give()
			_, err = cli.Write([]byte("later"))
			assert.ErrorIs(t, err, ErrConnectionTimedOut, "a Write after the Conn ended")
		})
	}
}
