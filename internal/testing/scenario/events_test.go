package scenario

import (
	"github.com/gonetcode/netcode/internal/packetq"
	"github.com/gonetcode/netcode/internal/server"
)

// handler is what the scenario tests observe of a server: the events an
// adapter makes of the core's results.
type handler interface {
	Connected(c *server.Client)
	Payload(c *server.Client, p []byte)
	Disconnected(c *server.Client, why server.Reason)
}

// events turns what the server core returns (connected clients, payloads
// in each client's queue, the reason it left) into handler calls, as the
// root package's Listener does with Conns.
type events struct {
	h    handler
	live []*server.Client
	buf  [packetq.MaxBytes]byte
}

// connected records a client Receive returned.
func (e *events) connected(c *server.Client) {
	if c != nil {
		e.live = append(e.live, c)
		e.h.Connected(c)
	}
}

// collect delivers every queued payload, then the departures.
func (e *events) collect() {
	kept := e.live[:0]
	for _, c := range e.live {
		q := c.Queue()
		for q.Len() > 0 {
			n, _, err := q.Read(e.buf[:])
			if err != nil {
				break
			}
			e.h.Payload(c, e.buf[:n])
		}
		if why := c.Reason(); why != 0 {
			e.h.Disconnected(c, why)
			continue
		}
		kept = append(kept, c)
	}
	clear(e.live[len(kept):])
	e.live = kept
}
