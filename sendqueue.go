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

// sendTrains is both sides' batched send: engine.SendTrains with
// netcode's packet overhead.
func sendTrains(turn engine.WriteTurn, ps [][]byte, stop, deadline <-chan struct{}, sendTrain func(train [][]byte) (int, error)) (int, error) {
	return engine.SendTrains(turn, ps, payloadOverhead, stop, deadline, sendTrain)
}

// isKeepAlive reports whether b is a netcode keep-alive packet.
func isKeepAlive(b []byte) bool {
	typ, ok := protocol.PeekType(b)
	return ok && typ == protocol.KeepAlive
}
