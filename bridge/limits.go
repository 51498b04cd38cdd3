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

// Defaults for the relay's own zero fields of Config, stated there too
// (those of MaxSessions, WriteTimeout and SocketBuffer are every bridge's:
// wsbridge.SetDefaults, wsbridge.DefaultSocketBuffer).
const (
	defaultHandshakeTimeout = 5 * time.Second
	defaultDialTimeout      = 30 * time.Second
)
