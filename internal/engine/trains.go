package engine

import (
	"github.com/gonetcode/netcode/internal/sendq"
	"github.com/gonetcode/netcode/internal/transport"
)

// TrainLen is how many of ps (at least one) a Conn's batched send seals
// before it sends them, each payload growing by overhead bytes once
// sealed (the dialect's packet overhead): as many as one GSO train
// carries, so that the Output they are sealed into holds at most a
// train's bytes.
func TrainLen(ps [][]byte, overhead int) int {
	n, bytes := 0, 0
	for n < len(ps) && n < transport.MaxTrainSegments {
		bytes += len(ps[n]) + overhead
		if n > 0 && bytes > transport.MaxTrainBytes {
			break
		}
		n++
	}
	return n
}

// SendTrains is a Conn's batched send (msgconn.BatchEndpoint's
// SendPayloads), for both dialects and both sides: in the Conn's write
// turn (taken as a Write takes it), it hands ps to sendTrain a train at a
// time (TrainLen), which seals and sends them, one batched write a train
// (a send queue's, or Held's), and returns how many it sent. It stops at
// sendTrain's first error and, between trains, once stop is closed:
// Close, which waits for the turn, waits for one train at most.
func SendTrains(turn WriteTurn, ps [][]byte, overhead int, stop, deadline <-chan struct{}, sendTrain func(train [][]byte) (int, error)) (int, error) {
	if !turn.Take(stop, deadline) {
		return 0, TurnErr(stop)
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
		n, err = sendTrain(ps[sent : sent+TrainLen(ps[sent:], overhead)])
		sent += n
	}
	turn.Give()
	return sent, err
}
