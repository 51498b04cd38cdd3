// The package's defaults, bounds and batch sizes, in one place.

package transport

// Defaults for the zero fields of MuxConfig.
const (
	// defaultMuxReadQueue is the least read queue: 0 means the larger of
	// it and defaultMuxReadQueuePerSession × MaxSessions.
	defaultMuxReadQueue = 1024
	// defaultMuxReadQueuePerSession is the read queue's room per session
	// of the cap when MuxConfig.ReadQueue is 0: a connected client sends
	// about 20 datagrams a second (10 keep-alives or payloads, and its
	// payloads at a game's rate), so this is a couple of hundred
	// milliseconds of every session at once, for the server's reader to
	// be late by. The room costs nothing until used (the queue's buffers
	// are pooled and its ring grows as needed).
	defaultMuxReadQueuePerSession = 4
	defaultMuxSendQueue           = 256
)

// muxSessionShare is how many of one WebSocket session's datagrams may
// wait in the read queue at once; past it, the session's new ones are
// dropped (counted in Dropped). A peer that floods cannot take the room of
// the others and of the UDP clients.
const muxSessionShare = 64

// muxReadBatch is how many UDP datagrams the Mux's reader takes from the
// socket at once.
const muxReadBatch = 64

// defaultReadQueue is the default of Options.ReadQueue.
const defaultReadQueue = 256
