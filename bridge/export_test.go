package bridge

import "github.com/gonetcode/netcode/bridge/internal/wsbridge"

// Bounds the external tests check.
const (
	CloseTimeout = wsbridge.CloseTimeout
	MuxEndGrace  = wsbridge.MuxEndGrace
)
