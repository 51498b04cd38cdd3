package bridge

// Bounds the external tests check.
const (
	CloseTimeout = closeTimeout
	MuxEndGrace  = muxEndGrace
)
