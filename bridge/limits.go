// The relay's defaults and bounds, in one place; those it shares with the
// transport's Mux, and the bounds of every session's close, live in
// internal/wsbridge's limits.go.

package bridge

import (
	"time"

	"github.com/gonetcode/netcode/bridge/internal/wsbridge"
)

// Defaults for the zero fields of Config.
const (
	DefaultMaxSessions      = wsbridge.DefaultMaxSessions // 1024
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultDialTimeout      = 30 * time.Second
	DefaultIdleTimeout      = wsbridge.DefaultIdleTimeout  // 30 s
	DefaultWriteTimeout     = wsbridge.DefaultWriteTimeout // 10 s
	// DefaultSocketBuffer is the default of Config.SocketBuffer: a
	// relayed session carries one browser's traffic, far from what the
	// 4 MiB of a dialed netcode client's socket are for.
	DefaultSocketBuffer = 256 << 10
)
