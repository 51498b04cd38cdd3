// The relay's defaults and bounds, in one place; those it shares with the
// transport's Mux, and the bounds of every session's close, live in
// internal/wsbridge's limits.go.

package bridge

import (
	"time"

	"github.com/gonetcode/netcode/bridge/internal/wsbridge"
)

// DefaultIdleTimeout is Config.IdleTimeout's default, 30 s: a game whose
// browsers may stay silent for a while (a lobby, a turn) sizes its own
// heartbeat by it.
const DefaultIdleTimeout = wsbridge.DefaultIdleTimeout

// Defaults for the other zero fields of Config, stated there too.
const (
	defaultMaxSessions      = wsbridge.DefaultMaxSessions // 1024
	defaultHandshakeTimeout = 5 * time.Second
	defaultDialTimeout      = 30 * time.Second
	defaultWriteTimeout     = wsbridge.DefaultWriteTimeout // 10 s
	// defaultSocketBuffer is the default of Config.SocketBuffer: a
	// relayed session carries one browser's traffic, far from what the
	// 4 MiB of a dialed netcode client's socket are for.
	defaultSocketBuffer = 256 << 10
)
