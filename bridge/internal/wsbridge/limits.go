package wsbridge

import (
	"time"

	"github.com/coder/websocket"
)

// Defaults every bridge shares (the relay's Handler, the transport's Mux,
// the wire's Handler): package bridge exports DefaultIdleTimeout for its
// Config, and each package documents them for its configuration.
const (
	DefaultMaxSessions  = 1024
	DefaultIdleTimeout  = 30 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	// DefaultSocketBuffer is the receive and send buffer size of each
	// session's UDP socket (the relay's and the wire's): a session
	// carries one browser's traffic, far from what the 4 MiB of a dialed
	// netcode client's socket are for.
	DefaultSocketBuffer = 256 << 10
)

// SetDefaults gives the caps of every bridge's configuration their
// defaults: DefaultMaxSessions to a maxSessions of 0 or less, and
// DefaultIdleTimeout and DefaultWriteTimeout to a zero idle or write
// timeout (a negative one disables it).
func SetDefaults(maxSessions *int, idle, write *time.Duration) {
	if *maxSessions <= 0 {
		*maxSessions = DefaultMaxSessions
	}
	if *idle == 0 {
		*idle = DefaultIdleTimeout
	}
	if *write == 0 {
		*write = DefaultWriteTimeout
	}
}

// CodeIdleTimeout is the close code of a session of either bridge through
// which nothing went within its idle timeout (package bridge exports it).
const CodeIdleTimeout websocket.StatusCode = 4012

// MuxEndGrace is how long an ended session of a Mux has to write what is
// queued for it and finish the close handshake before its connection is
// cut (a peer that does not read, or that declared a frame longer than it
// sent, would otherwise hold it, and Close, for as long as it likes).
const MuxEndGrace = 2 * time.Second

// maxRefusing bounds the sessions being refused with 1013 at once; past
// it, refusals are plain HTTP 503 responses, which cost no upgrade.
const maxRefusing = 64

// BatchBytes bounds what a session holds back to send in one write.
const BatchBytes = 16 << 10

// CloseTimeout bounds the close of a relay session's WebSocket, and of a
// refused one: writing the close frame and waiting for the peer's. A peer
// that does not answer, or that declared a frame longer than it sent
// (coder/websocket's Close reads the rest of the frame first, with no
// deadline of its own), has its TCP connection cut when it passes.
const CloseTimeout = time.Second
