package bridge

import "github.com/gonetcode/netcode/bridge/internal/wsbridge"

// Bounds the external tests check.
const (
	CloseTimeout = wsbridge.CloseTimeout
	MuxEndGrace  = wsbridge.MuxEndGrace
)

// The close codes and the refusal header, by name, for the external tests;
// the package documentation's table gives their numbers.
const (
	CodeDisconnected               = wsbridge.CodeDisconnected
	CodeConnectionDenied           = wsbridge.CodeConnectionDenied
	CodeConnectTokenExpired        = wsbridge.CodeConnectTokenExpired
	CodeInvalidConnectToken        = wsbridge.CodeInvalidConnectToken
	CodeConnectionRequestTimedOut  = wsbridge.CodeConnectionRequestTimedOut
	CodeConnectionResponseTimedOut = wsbridge.CodeConnectionResponseTimedOut
	CodeConnectionTimedOut         = wsbridge.CodeConnectionTimedOut
	CodeServerNotAllowed           = wsbridge.CodeServerNotAllowed
	CodeHandshakeTimeout           = wsbridge.CodeHandshakeTimeout
	CodeIdleTimeout                = wsbridge.CodeIdleTimeout
	CodeBridgeFull                 = wsbridge.CodeFull
	RefusedHeader                  = wsbridge.RefusedHeader
)

// WheelArmed is how many timers the relay's wheel has armed: two per
// connected session (its netcode Conn's and its watchdog's).
func WheelArmed(h *Handler) int { return h.wheel.Armed() }
