// Package engine is the socket engine the dialects bind to (DESIGN.md
// section 12): per socket, in the manner of quic-go's Transport, the
// reader goroutine's loop, the read turn and the pulling Reads that share
// it (Socket, Reader), and the held-write policy of a connected socket
// (Held). A dialect (netcode's Listener and dialed Conn in the root
// package) is a binding: a Receiver that hands each datagram to its
// I/O-free core ("datagram from A at t") and carries out the core's
// Output, plus its Conn type and errors. Server and client sockets differ
// to the engine only in demultiplexing, their Role: Many peers by
// address, or One.
//
// # Goroutines, timer callbacks, queues and locks
//
// Per socket (the root package's doc and package cute's name the
// dialect's own goroutines beside these; TestGoroutineInventory checks
// them all, timer callbacks included while they run):
//
//	reader ×1 per socket   Socket.Run, on the binding's goroutine
//	  │                    (netcode.(*Listener).readLoop,
//	  │                    netcode.(*dialConn).readLoop): holds the read
//	  │                    turn; reads batches (transport.ReadLoopTurns)
//	  │                    and hands each to the Receiver; after a batch
//	  │                    it gives the turn to a Read that waits (Many:
//	  │                    only one Read, and only after a batch from one
//	  │                    peer) and takes it back 20-40 ms after the
//	  ▼                    last pull ended, or at once when a pull asks
//	Receiver (binding)     in the read turn: core.Receive → Output →
//	                       datagrams to the send queue or the socket,
//	                       payloads to each Conn's packetq.Queue
//	Conn.Read (callers)    Reader.Pull: with nothing queued and the turn
//	                       free, reads the socket itself with its Conn's
//	                       read deadline (Many: bounded by 200 ms),
//	                       acts on what it read as the reader does, and
//	                       gives the turn back; else waits on its queue
//	                       until the turn may be free (Freed)
//	readTurn timers        idle and grace, the reader's own (it waits on
//	                       their channels; no callback)
//	Held's timer           time.AfterFunc(HoldBound): its callback, the
//	                       binding's flush (netcode.(*dialConn).flushHeld),
//	                       takes the Conn's write turn and writes the
//	                       held train
//
// A socket's send queue and its writer goroutine (internal/sendq,
// sendq.(*Queue).writer) belong to the binding's socket too: the replies
// of the Receiver and the Conns' Writes go through it, grouped by peer
// into GSO trains; a dialed netcode Conn writes directly, in its write
// turn, with Held.
//
// Locks, in the order they may be taken: the read turn (a channel,
// readTurn.tok) → a Conn's write turn (a channel, the binding's) → the
// core's locks → packetq.Queue's lock. Socket.dmu (the socket's read
// deadline and its puller) is a leaf; the send queue's lock is a leaf,
// never held across a socket write. No engine lock is held across a
// call into the binding but the read turn, and the binding holds none of
// its own across a call into the engine but its write turn (Held.Write).
//
// Files are split by concept, not by length: turn.go is the read turn,
// socket.go a socket's reader and pulls, held.go held writes. A file past
// about 600 lines is a signal to look for its second concept, not a rule
// to cut at; one type's life stays in one file.
package engine
