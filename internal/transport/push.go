package transport

import "net"

// Pusher is a socket some of whose datagrams arrive on goroutines of their
// own: the WebSocket sessions of the bridge's Mux, each read by its own
// goroutine. A reader of the socket that can act on a datagram at once, on
// any goroutine, gives it a sink (Push); from then on those datagrams go
// to the sink on the goroutine that received them, one batch at a time,
// instead of through a queue that ReadBatch reads. It saves the hand-off
// to the reader's goroutine and back.
//
// The sink acts on ms at once and never blocks on a peer (it drops what
// has no room, as a full socket buffer would); it may modify the
// datagrams' bytes, which are the pusher's and reused after it returns.
// It is called concurrently, from every session's goroutine.
type Pusher interface {
	Push(sink func(ms []Message))
}

func (b Batched) pusher() Pusher { return b.S }

// PusherOf returns the Pusher a net.PacketConn of this module offers
// through its Batched, if any.
func PusherOf(pc net.PacketConn) (Pusher, bool) {
	b, ok := pc.(interface{ pusher() Pusher })
	if !ok || b.pusher() == nil {
		return nil, false
	}
	return b.pusher(), true
}

// WaitReporter is a socket that tells whether its last ReadBatch waited
// for its datagram (found the socket empty): a pulling Read that keeps
// waiting for one datagram then asks for one only.
type WaitReporter interface {
	ReadWaited() bool
}
