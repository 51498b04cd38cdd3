// Package aead is the ChaCha20-Poly1305 cipher netcode 1.02 seals packets and
// challenge tokens with: the 96-bit nonce is four zero bytes and the 64-bit
// little-endian sequence number. The server seals its challenge tokens with
// it. It also holds the ciphers of crypto's PacketAEAD and PrivateTokenAEAD,
// which embed them (Packet, Token), and the functions that seal and open with
// them, so that package crypto exports the types and their constructors only:
// packages protocol and token, and the server, seal and open through this
// package.
package aead

import (
	"crypto/cipher"
	"encoding/binary"
	"errors"

	"golang.org/x/crypto/chacha20poly1305"
)

// ErrOpen is returned when a ciphertext does not authenticate: wrong key,
// wrong nonce, wrong associated data, or tampered bytes.
var ErrOpen = errors.New("netcode/crypto: message authentication failed")

// AEAD seals and opens with ChaCha20-Poly1305 under one key, using the netcode
// nonce built from a 64-bit sequence number. It is used for challenge tokens
// and, through crypto.PacketAEAD, for packets. An AEAD must not be used concurrently.
type AEAD struct {
	c     cipher.AEAD
	nonce [chacha20poly1305.NonceSize]byte
}

// New returns an AEAD for key. Setting up the cipher allocates; do it once
// per key and reuse the AEAD.
func New[K ~[32]byte](key *K) *AEAD {
	k := [32]byte(*key)
	a, err := chacha20poly1305.New(k[:])
	if err != nil {
		// Unreachable: the key has the right length by its type.
		panic("netcode/crypto: " + err.Error())
	}
	return &AEAD{c: a}
}

func (a *AEAD) setNonce(sequence uint64) []byte {
	// Bytes 0..3 stay zero for the lifetime of the AEAD.
	binary.LittleEndian.PutUint64(a.nonce[4:], sequence)
	return a.nonce[:]
}

// Seal appends the encryption of plaintext followed by the 16-byte MAC to dst
// and returns the result. To seal in place, pass plaintext[:0] as dst.
func (a *AEAD) Seal(dst []byte, sequence uint64, plaintext, ad []byte) []byte {
	return a.c.Seal(dst, a.setNonce(sequence), plaintext, ad)
}

// Open authenticates and decrypts ciphertext (which ends with the MAC), appends
// the plaintext to dst and returns the result. To open in place, pass
// ciphertext[:0] as dst. It returns ErrOpen if authentication fails.
func (a *AEAD) Open(dst []byte, sequence uint64, ciphertext, ad []byte) ([]byte, error) {
	out, err := a.c.Open(dst, a.setNonce(sequence), ciphertext, ad)
	if err != nil {
		return nil, ErrOpen
	}
	return out, nil
}
