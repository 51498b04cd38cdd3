// Package wire is what the WebAssembly example's client (package
// examples/wasm) and server (package examples/wasm/server) agree on: the
// channels of the reliable.Session each runs over its *netcode.Conn, and
// the pattern of the reliable message the page sends to check it.
package wire

import "github.com/gonetcode/netcode/reliable"

// The session's channels.
const (
	// Reliable is the ReliableOrdered channel: the server echoes each
	// message, of up to MaxReliableMessage bytes, exactly once and in
	// order.
	Reliable = 0
	// Unreliable is the Unreliable channel: the server echoes each
	// message once; it arrives at most once, whole or not at all.
	Unreliable = 1
)

// The largest messages: the server holds one buffer of each size per
// client.
const (
	// MaxReliableMessage is the largest message of the Reliable channel.
	MaxReliableMessage = 256 << 10
	// MaxUnreliableMessage is the largest message of the Unreliable
	// channel: a few packets (a message larger than one is fragmented).
	MaxUnreliableMessage = 4 << 10
)

// MaxPacket is the largest packet of the sessions, under netcode's 1200
// bytes of payload so that a netcode packet (25 bytes more) fits in one
// WebTransport datagram: Chromium's carry at most 1215 bytes
// (datagrams.maxDatagramSize), quic-go's at most about 1160 on a path
// with a 1280-byte MTU. Larger messages are fragmented.
const MaxPacket = 1100

// Config returns the session configuration of both ends. A peer with
// another layout ends the session with reliable.ErrConfigMismatch.
func Config() *reliable.Config {
	return &reliable.Config{
		MaxPacketBytes: MaxPacket,
		Channels: []reliable.ChannelConfig{
			Reliable:   {Kind: reliable.ReliableOrdered, MaxMessageSize: MaxReliableMessage},
			Unreliable: {Kind: reliable.Unreliable, MaxMessageSize: MaxUnreliableMessage},
		},
	}
}

// Pattern returns n bytes of the check pattern: a xorshift sequence, in
// which a lost, repeated or misplaced piece of a message shows.
func Pattern(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x >> 24)
	}
	return b
}
