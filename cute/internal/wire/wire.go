// Package wire is the Cute Protocol 1.00 on the wire, byte for byte as Cute
// Framework's cute_net.h 1.03 writes it: the 1114-byte connect token and its
// client-side and server-side readers, the eight packet types with their
// writers and reader, and the 256-entry replay buffer. It does no I/O and
// keeps no state beyond a Replay; the cores in package core drive it.
//
// Every reader takes hostile bytes: it never panics, never reads outside
// the datagram and allocates nothing. Where cute_net.h accepts something
// unsafe (an unchecked payload length, unchecked endpoint types), the
// reader here refuses it; each such place says so.
package wire

import (
	"encoding/binary"
	"errors"

	"github.com/gonetcode/netcode/cute/internal/hydro"
)

// Version is the protocol version string with its terminating NUL, as it
// appears in the token's REST and public sections.
const Version = "CUTE 1.00\x00"

// Sizes.
const (
	VersionBytes       = len(Version)
	KeyBytes           = hydro.KeyBytes
	UserDataBytes      = 256
	MaxEndpoints       = 32
	RESTBytes          = 90                              // the token's client-only prefix
	TokenPacketBytes   = 1024                            // the connect token packet
	TokenBytes         = RESTBytes + TokenPacketBytes    // what the web service hands a client
	PublicBytes        = 568                             // the token packet's public section
	SecretBytes        = 392                             // its sealed secret section
	SignatureBytes     = hydro.SignatureBytes            // its signature
	secretPlainBytes   = SecretBytes - hydro.HeaderBytes // 356
	secretZeroBytes    = 28                              // the zero prefix of the secret plaintext
	signedBytes        = TokenPacketBytes - SignatureBytes
	ChallengeDataBytes = 256
	// HeaderBytes is the overhead of every packet but the connect token:
	// type, sequence, 28 unauthenticated zero bytes, SIV and MAC.
	HeaderBytes = 1 + 8 + zeroBytes + hydro.HeaderBytes
	zeroBytes   = 28
	sealAt      = 1 + 8 + zeroBytes // where the secretbox starts
	// MaxPayloadBytes is the largest payload a packet carries.
	MaxPayloadBytes = 1205
	// MaxPacketBytes is the largest datagram either side sends or reads.
	MaxPacketBytes = HeaderBytes + 2 + MaxPayloadBytes
)

// Datagram sizes the reader insists on.
const (
	AcceptedBytes  = HeaderBytes + 16
	EmptyBytes     = HeaderBytes // denied, keepalive, disconnect
	ChallengeBytes = HeaderBytes + 8 + ChallengeDataBytes
)

// Context is the libhydrogen context of every secretbox and signature.
var Context = [hydro.ContextBytes]byte{'C', 'U', 'T', 'E', '_', 'C', 'T', 'X'}

// Type is a packet type. The numbers are the code's, not the standard
// text's (which swaps 1, 3, 4 and 7).
type Type byte

// The packet types.
const (
	ConnectToken       Type = 0
	ConnectionAccepted Type = 1
	ConnectionDenied   Type = 2
	KeepAlive          Type = 3
	Disconnect         Type = 4
	ChallengeRequest   Type = 5
	ChallengeResponse  Type = 6
	Payload            Type = 7
)

// String names the type as cute_net.h does.
func (t Type) String() string {
	switch t {
	case ConnectToken:
		return "CONNECT_TOKEN"
	case ConnectionAccepted:
		return "CONNECTION_ACCEPTED"
	case ConnectionDenied:
		return "CONNECTION_DENIED"
	case KeepAlive:
		return "KEEPALIVE"
	case Disconnect:
		return "DISCONNECT"
	case ChallengeRequest:
		return "CHALLENGE_REQUEST"
	case ChallengeResponse:
		return "CHALLENGE_RESPONSE"
	case Payload:
		return "PAYLOAD"
	}
	return "UNKNOWN"
}

// Errors of the packet reader.
var (
	ErrPacketSize = errors.New("cute: packet size does not fit its type")
	ErrPacketType = errors.New("cute: unknown packet type")
	ErrReplayed   = errors.New("cute: packet sequence already seen or too old")
	ErrDecrypt    = errors.New("cute: packet does not decrypt")
	ErrPayloadLen = errors.New("cute: payload length field does not match the packet")
)

var le = binary.LittleEndian
