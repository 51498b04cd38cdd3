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
	CodeDisconnected               = codeDisconnected
	CodeConnectionDenied           = codeConnectionDenied
	CodeConnectTokenExpired        = codeConnectTokenExpired
	CodeInvalidConnectToken        = codeInvalidConnectToken
	CodeConnectionRequestTimedOut  = codeConnectionRequestTimedOut
	CodeConnectionResponseTimedOut = codeConnectionResponseTimedOut
	CodeConnectionTimedOut         = codeConnectionTimedOut
	CodeServerNotAllowed           = codeServerNotAllowed
	CodeHandshakeTimeout           = codeHandshakeTimeout
	CodeIdleTimeout                = codeIdleTimeout
	CodeBridgeFull                 = codeBridgeFull
	RefusedHeader                  = wsbridge.RefusedHeader
)
