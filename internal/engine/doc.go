// Package engine is the socket engine the dialects bind to (DESIGN.md
// section 12): per socket, in the manner of quic-go's Transport, the
// reader goroutine's loop, the read turn and the pulling Reads that share
// it (Socket, Reader), and the held-write policy of a Conn with one peer
// (Held: a dialed Conn's connected socket, a server Conn's send queue,
// bounded by a Listener's Fallback). A dialect (netcode's Listener and
// dialed Conn in the root package) is a binding: a Receiver that hands each datagram to its
// I/O-free core ("datagram from A at t") and carries out the core's
// Output, plus its Conn type and errors. Server and client sockets differ
// to the engine only in demultiplexing, their Role: Many peers by
// address, or One.
//
// # Goroutines, timer callbacks, queues and locks
//
// Per socket (the root package's doc and package cute's name the
// dialect's goroutines that run these; TestGoroutineInventory checks
// them all, timer callbacks included while they run):
//
//	reader ×1 per socket   Socket.Run, on the binding's goroutine
//	  │                    (netcode.(*Listener).readLoop,
//	  │                    netcode.(*dialConn).readLoop, and cute's):
//	  │                    holds the read turn; reads batches
//	  │                    (transport.ReadLoopTurns) and hands each to
//	  │                    the Receiver; after a batch it gives the turn
//	  │                    to a Read that waits (Many: only one Read, and
//	  │                    only after a batch from one peer) and takes it
//	  │                    back 20-40 ms after the last pull ended, or at
//	  ▼                    once when a pull asks (Many: a pull
//	                       from several peers, or one whose Conn
//	                       has ended, whose Read will not return)
//	Receiver (binding)     in the read turn: core.Receive → Output →
//	                       datagrams to the send queue (a Listener's) or
//	                       the socket (a dialed Conn's, in its write
//	                       turn), payloads to each Conn's packetq.Queue,
//	                       the next deadline to the Ticker or Due
//	Conn.Read (callers)    Reader.Pull: with nothing queued and the turn
//	                       free, reads the socket itself with its Conn's
//	                       read deadline (Many: bounded by 200 ms), acts
//	                       on what it read as the reader does, and gives
//	                       the turn back; else waits on its queue until
//	                       the turn may be free (Freed)
//	ticker ×1 per Listener Ticker.Run, on the binding's goroutine
//	                       (netcode.(*Listener).tickLoop,
//	                       cute.(*Listener).updater): the core's Update
//	                       at the deadline it returned or an earlier one
//	                       given by Earlier (a new client, an Output)
//	Due's timer            per dialed Conn, time.AfterFunc or a relay's
//	                       timerwheel: its callback (engine.(*Due).fire)
//	                       runs the binding's update (the core's Update,
//	                       in the Conn's write turn) when it is due; and
//	                       per Conn of package cute's client/server layer,
//	                       either side: the layer's Update
//	Held's dispatch        per dialed Conn with a connected socket, while
//	                       it holds Writes: a goroutine the first datagram
//	                       held starts (engine.(*Held).dispatch, no
//	                       allocation); it runs when the writing goroutine
//	                       yields its thread or another thread takes it
//	                       up, looks again while the train grows, then
//	                       takes the Conn's write turn and writes the
//	                       train. No timer: a held datagram leaves by the
//	                       writer's next wait, with no time passing on a
//	                       simulated clock (held.go says when else)
//	Fallback's timer       per Listener (netcode's and cute's), in place
//	                       of Held's dispatch for its server Conns: a
//	                       Conn whose first datagram is held registers
//	                       once; time.AfterFunc, armed while any Conn is
//	                       registered, at most once per HeldFallback (1
//	                       ms); its callback (engine.(*Fallback).fire)
//	                       takes each registered Conn's write turn if it
//	                       is free (else looks again next time) and sends
//	                       its train, never waiting on the send queue.
//	                       The common ways out (the burst's last Write, a
//	                       Read finding nothing) send first, with no
//	                       goroutine woken; this bounds the rest
//	readTurn's timers      idle and grace, the reader's own: it waits on
//	                       their channels (no callback)
//
// A Listener's socket has a send queue and its writer goroutine
// (internal/sendq, sendq.(*Queue).writer): the Receiver's replies and
// the Conns' Writes go through it, grouped by peer into GSO trains; a
// Write finds it idle and writes at once, else it queues (bounded: a
// full queue drops keep-alives, and makes a Write wait until its deadline
// or Close). A server Conn's Writes go to it through Held, in the Conn's
// write turn: those held while the Conn's read queue holds payloads leave
// as one send of several, which an idle queue writes at once from the
// writing goroutine, one GSO train to the peer (a Held's sink, InitQueue),
// or at the latest by the Listener's Fallback.
// A dialed Conn writes directly, in its write turn, through Held (Init).
//
// Every goroutine the engine runs of its own, by the function it runs
// (TestGoroutineInventory in the root package fails if another runs, and
// counts timer callbacks while they run):
//
//	engine.(*Due).fire       a dialed Conn's timer callback, or a cute layer's, while it runs: the Update when due
//	engine.(*Held).dispatch  a dialed Conn's held Writes' train, from the first held to its write
//	engine.(*Fallback).fire  a Listener's server Conns' held trains, HeldFallback after the first registered, while it runs
//
// Locks, in the order they may be taken: the read turn (a channel,
// readTurn.tok) → a Conn's write turn (WriteTurn, a channel the binding
// owns; Held's dispatch and Flush and the binding's update take it, and
// the Fallback's sweep only if it is free, holding nothing) → the core's
// locks → packetq.Queue's lock. Socket.dmu (the socket's read deadline
// and its puller), Due.mu, Ticker.mu and Fallback.mu (taken in a write
// turn to register, and by the sweep with nothing held) are leaves
// (leafMutex);
// the send queue's lock is a leaf, never held across a socket write. No
// engine lock is held across a call into the binding but the read turn
// (Receive), and Due's and Ticker's call their update with none held.
//
// The order is checked: built with -tags lockrank (as CI runs the tests,
// the adapter-level soak among them, under -race), every take of the read
// turn, a write turn or a leaf records its rank for its goroutine and
// panics if the goroutine holds one of that rank or above, and each call
// into the binding panics if a leaf is held (lockrank.go; TestLockRanks
// proves it catches each inversion). The cores' own locks are not ranked:
// they are taken and released inside each core call, which calls out to
// nothing.
//
// Files are split by concept, not by length: turn.go is the read turn,
// socket.go a socket's reader and pulls, held.go held writes, due.go the
// deadline mechanism (Due, Ticker), trains.go a Conn's batched send
// (SendTrains, in the write turn), locks.go the write turn and the leaf
// locks, lockrank.go the lock-order check. A file past about 600 lines
// is a signal to look for its second concept, not a rule to cut at; one
// type's life stays in one file.
package engine
