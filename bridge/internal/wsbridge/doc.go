// Package wsbridge is what the two WebSocket bridges share: the relay
// (package bridge) and the end-to-end transport (package
// bridge/transport). Gate is their one admission path (subprotocol, cap
// and refusals, upgrade); Watchdog enforces a session's timeouts,
// including the bound on its close; BatchConn gathers a session's writes
// into one write to the connection; CloseWS closes a WebSocket within
// CloseTimeout whatever the client sends or withholds.
package wsbridge
