package client

// The Output a Client's calls fill: the datagrams to send, the payloads
// received, the state change and the log records, acted on by the caller
// after the call, with no lock of the Client held.

import (
	"net/netip"
	"time"

	"github.com/gonetcode/netcode/internal/transport"
	"github.com/gonetcode/netcode/protocol"
)

// Output is what one call to a Client did. The caller owns it and passes
// the same Output to call after call: each call resets it and then fills
// it, reusing its buffers, so a Client in steady state allocates nothing.
// An Output must not be shared by calls that run at the same time.
type Output struct {
	// From and To are the states before and after the call. They differ
	// when the call changed the state, which a call does at most once.
	From, To State
	// Payload is the payload Receive accepted, or nil. It is a slice of the
	// datagram passed to Receive (decrypted in place there), valid until
	// the caller reuses that buffer.
	Payload []byte
	// Sealed holds the Datagrams to send, in order. Their bytes live in
	// the Output and are valid until its next use. The type is the one a
	// batched socket write takes, so they can go out in one write.
	transport.Sealed
	// Next is when Update is due: the next request, response or
	// keep-alive, a timeout, the token's expiry, or at once when a denial
	// waits to be acted on. It is the zero Time once the state is final
	// (nothing will ever be due).
	Next time.Time
	// Records are the call's log records, for Client.Log.
	Records []Record
}

// Record is one log record of a Client: a state change (From to To) or,
// with Server set, the start of a handshake with that server. Plain values,
// formatted only by Client.Log.
type Record struct {
	From, To State
	Server   netip.AddrPort
}

// Changed reports whether the call changed the state (from From to To).
func (o *Output) Changed() bool { return o.From != o.To }

// outputBuf is the capacity of an Output's buffer: room for what one call
// sends, the largest packet or every disconnect packet.
const outputBuf = protocol.MaxPacketBytes

// reset starts o for a call made in state s.
func (o *Output) reset(s State) {
	o.From, o.To = s, s
	o.Payload = nil
	o.Sealed.Reset()
	o.Next = time.Time{}
	clear(o.Records)
	o.Records = o.Records[:0]
}
