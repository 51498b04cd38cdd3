package wsbridge

import (
	"time"

	"github.com/coder/websocket"
)

// Defaults both bridges share; package bridge exports them for its
// Config, and package bridge/transport documents them for its MuxConfig.
const (
	DefaultMaxSessions  = 1024
	DefaultIdleTimeout  = 30 * time.Second
	DefaultWriteTimeout = 10 * time.Second
)

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
