// Package crypto provides the authenticated encryption used by netcode 1.02.
//
// Packets are sealed with ChaCha20-Poly1305 (IETF, 96-bit
// nonce). The nonce is four zero bytes followed by the 64-bit little-endian
// sequence number. Packets carry associated data made of the 13-byte version
// info "NETCODE 1.02\x00", the 64-bit little-endian protocol id and the packet's
// prefix byte.
//
// The private part of a connect token is sealed with XChaCha20-Poly1305 under a
// random 24-byte nonce, with associated data made of the version info, the
// protocol id and the token's expire timestamp.
//
// A Key is what a game keeps: the private key it shares between its token
// backend and its servers (GenerateKey, ParseKey, ReadKeyFile). PacketAEAD and
// PrivateTokenAEAD are the ciphers made from keys that package protocol's
// writers and Reader, and package token, seal and open with. They keep scratch
// space for nonces and associated data so that the hot path never allocates;
// for that reason a value of either must not be used by more than one
// goroutine at a time.
package crypto

import (
	"crypto/rand"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/gonetcode/netcode/internal/aead"
)

// Sizes used by the netcode 1.02 encryption.
const (
	KeyBytes        = chacha20poly1305.KeySize    // 32: every key
	MACBytes        = chacha20poly1305.Overhead   // 16: the tag that ends every sealed part
	TokenNonceBytes = chacha20poly1305.NonceSizeX // 24: the nonce of a connect token's private part
)

// Key is a 256-bit symmetric key.
type Key [KeyBytes]byte

// GenerateKey returns a new key from the operating system's secure random source.
func GenerateKey() (Key, error) {
	var k Key
	_, err := rand.Read(k[:])
	return k, err
}

// PacketAEAD is the packet cipher of one direction of one connection, which
// package protocol's writers seal with and its Reader opens with: the key,
// the protocol id and the version info are fixed when it is made; the prefix
// byte and the sequence number come with each packet. A PacketAEAD must not
// be used concurrently.
type PacketAEAD struct {
	packetCipher
}

// packetCipher is the cipher a PacketAEAD holds, embedded so that package
// protocol reaches it (through package aead) while PacketAEAD exports no
// method.
type packetCipher = aead.Packet

// NewPacketAEAD returns a PacketAEAD for key and protocolID.
func NewPacketAEAD(key *Key, protocolID uint64) *PacketAEAD {
	p := new(PacketAEAD)
	aead.InitPacket(&p.packetCipher, (*[KeyBytes]byte)(key), protocolID)
	return p
}

// PrivateTokenAEAD is the cipher of the private part of connect tokens,
// XChaCha20-Poly1305 under the server's private key: package token's
// Generate seals with one, and protocol.Reader opens connection requests
// with one. A server keeps one for its key; a token backend may keep one
// per goroutine. It must not be used concurrently.
type PrivateTokenAEAD struct {
	tokenCipher
}

// tokenCipher is the cipher a PrivateTokenAEAD holds, embedded as
// packetCipher is.
type tokenCipher = aead.Token

// NewPrivateTokenAEAD returns a PrivateTokenAEAD for the given private key.
func NewPrivateTokenAEAD(privateKey *Key) *PrivateTokenAEAD {
	t := new(PrivateTokenAEAD)
	aead.InitToken(&t.tokenCipher, (*[KeyBytes]byte)(privateKey))
	return t
}
