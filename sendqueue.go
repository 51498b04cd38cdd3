package netcode

import (
	"io"

	"github.com/gonetcode/netcode/internal/engine"
	"github.com/gonetcode/netcode/internal/sendq"
	"github.com/gonetcode/netcode/internal/transport"
	"github.com/gonetcode/netcode/protocol"
)

// eofError is what a connection ends with when the peer disconnects cleanly.
var eofError = io.EOF

// sendQueue is a socket's one send path, shared with package cute: see
// internal/sendq.
type sendQueue = sendq.Queue

// traffic counts datagrams and their bytes, one way.
type traffic = sendq.Traffic

// noWait: see sendq.NoWait.
var noWait = sendq.NoWait

// newSendQueue returns the send queue of tc, which drops netcode
// keep-alives when full.
func newSendQueue(tc transport.Conn) *sendQueue { return sendq.New(tc, isKeepAlive, sendq.Len) }

// payloadOverhead bounds the bytes a payload packet adds to its payload.
const payloadOverhead = protocol.MaxPacketBytes - protocol.MaxPayloadBytes

// trainLen is how many of ps (at least one) a Conn's batched send seals
// before it writes them: as many as one GSO train carries, so that its
// Output holds at most a train's bytes.
func trainLen(ps [][]byte) int {
	n, bytes := 0, 0
	for n < len(ps) && n < transport.MaxTrainSegments {
		bytes += len(ps[n]) + payloadOverhead
		if n > 0 && bytes > transport.MaxTrainBytes {
			break
		}
		n++
	}
	return n
}

// sendTrains is both sides' batched send: in the Conn's write turn
// (turn, taken as send takes it), it hands ps to sendTrain a train at a
// time (trainLen), which seals and sends them and returns how many it
// sent. It stops at sendTrain's first error and, between trains, once
// stop is closed: Close, which waits for the turn, waits for one train
// at most.
func sendTrains(turn engine.WriteTurn, ps [][]byte, stop, deadline <-chan struct{}, sendTrain func(train [][]byte) (int, error)) (int, error) {
	if !turn.Take(stop, deadline) {
		return 0, engine.TurnErr(stop)
	}
	sent := 0
	var err error
	for sent < len(ps) && err == nil {
		select {
		case <-stop:
			if sent > 0 {
				err = sendq.ErrStopped
				continue
			}
		default:
		}
		var n int
		n, err = sendTrain(ps[sent : sent+trainLen(ps[sent:])])
		sent += n
	}
	turn.Give()
	return sent, err
}

// isKeepAlive reports whether b is a netcode keep-alive packet.
func isKeepAlive(b []byte) bool {
	typ, ok := protocol.PeekType(b)
	return ok && typ == protocol.KeepAlive
}
