// Package crypto provides the authenticated encryption used by netcode 1.02.
//
// Packets and challenge tokens are sealed with ChaCha20-Poly1305 (IETF, 96-bit
// nonce). The nonce is four zero bytes followed by the 64-bit little-endian
// sequence number. Packets carry associated data made of the 13-byte version
// info "NETCODE 1.02\x00", the 64-bit little-endian protocol id and the packet's
// prefix byte.
//
// The private part of a connect token is sealed with XChaCha20-Poly1305 under a
// random 24-byte nonce, with associated data made of the version info, the
// protocol id and the token's expire timestamp.
//
// The types here keep scratch space for nonces and associated data so that the
// hot path never allocates; for that reason a value of any of them must not be
// used by more than one goroutine at a time.
package crypto

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"

	"golang.org/x/crypto/chacha20poly1305"
)

// Sizes used by the netcode 1.02 encryption.
const (
	KeyBytes          = chacha20poly1305.KeySize    // 32
	MACBytes          = chacha20poly1305.Overhead   // 16
	NonceBytes        = chacha20poly1305.NonceSize  // 12
	XNonceBytes       = chacha20poly1305.NonceSizeX // 24
	VersionInfoBytes  = 13
	PacketADBytes     = VersionInfoBytes + 8 + 1 // version info, protocol id, prefix byte
	PrivateTokenADLen = VersionInfoBytes + 8 + 8 // version info, protocol id, expire timestamp
)

// VersionInfo is the 13-byte protocol version string, NUL terminated, that
// starts every connect token and connection request and every associated data.
var VersionInfo = [VersionInfoBytes]byte{'N', 'E', 'T', 'C', 'O', 'D', 'E', ' ', '1', '.', '0', '2', 0}

// ErrOpen is returned when a ciphertext does not authenticate: wrong key, wrong
// nonce, wrong associated data, or tampered bytes.
var ErrOpen = errors.New("netcode/crypto: message authentication failed")

// Key is a 256-bit symmetric key.
type Key [KeyBytes]byte

// GenerateKey returns a new key from the operating system's secure random source.
func GenerateKey() (Key, error) {
	var k Key
	err := RandomBytes(k[:])
	return k, err
}

// RandomBytes fills b from the operating system's secure random source.
func RandomBytes(b []byte) error {
	_, err := rand.Read(b)
	return err
}

// AEAD seals and opens with ChaCha20-Poly1305 under one key, using the netcode
// nonce built from a 64-bit sequence number. It is used for challenge tokens
// and, through PacketAEAD, for packets. An AEAD must not be used concurrently.
type AEAD struct {
	aead  cipher.AEAD
	nonce [NonceBytes]byte
}

// NewAEAD returns an AEAD for key. Setting up the cipher allocates; do it once
// per key and reuse the AEAD.
func NewAEAD(key *Key) *AEAD {
	a, err := chacha20poly1305.New(key[:])
	if err != nil {
		// Unreachable: the key has the right length by its type.
		panic("netcode/crypto: " + err.Error())
	}
	return &AEAD{aead: a}
}

func (a *AEAD) setNonce(sequence uint64) []byte {
	// Bytes 0..3 stay zero for the lifetime of the AEAD.
	binary.LittleEndian.PutUint64(a.nonce[4:], sequence)
	return a.nonce[:]
}

// Seal appends the encryption of plaintext followed by the 16-byte MAC to dst
// and returns the result. To seal in place, pass plaintext[:0] as dst.
func (a *AEAD) Seal(dst []byte, sequence uint64, plaintext, ad []byte) []byte {
	return a.aead.Seal(dst, a.setNonce(sequence), plaintext, ad)
}

// Open authenticates and decrypts ciphertext (which ends with the MAC), appends
// the plaintext to dst and returns the result. To open in place, pass
// ciphertext[:0] as dst. It returns ErrOpen if authentication fails.
func (a *AEAD) Open(dst []byte, sequence uint64, ciphertext, ad []byte) ([]byte, error) {
	out, err := a.aead.Open(dst, a.setNonce(sequence), ciphertext, ad)
	if err != nil {
		return nil, ErrOpen
	}
	return out, nil
}

// PacketAEAD seals and opens netcode packets for one direction of one
// connection: the key, the protocol id and the version info are fixed when it
// is made; the prefix byte and the sequence number come with each packet.
// A PacketAEAD must not be used concurrently.
type PacketAEAD struct {
	AEAD
	ad [PacketADBytes]byte
}

// NewPacketAEAD returns a PacketAEAD for key and protocolID.
func NewPacketAEAD(key *Key, protocolID uint64) *PacketAEAD {
	p := &PacketAEAD{AEAD: *NewAEAD(key)}
	copy(p.ad[:], VersionInfo[:])
	binary.LittleEndian.PutUint64(p.ad[VersionInfoBytes:], protocolID)
	return p
}

// Seal appends the encryption of plaintext, authenticated together with the
// packet's prefix byte, followed by the MAC, to dst.
func (p *PacketAEAD) Seal(dst []byte, prefix byte, sequence uint64, plaintext []byte) []byte {
	p.ad[PacketADBytes-1] = prefix
	return p.AEAD.Seal(dst, sequence, plaintext, p.ad[:])
}

// Open authenticates ciphertext (ending with the MAC) against the packet's
// prefix byte and sequence number, and appends the plaintext to dst.
func (p *PacketAEAD) Open(dst []byte, prefix byte, sequence uint64, ciphertext []byte) ([]byte, error) {
	p.ad[PacketADBytes-1] = prefix
	return p.AEAD.Open(dst, sequence, ciphertext, p.ad[:])
}

// PacketAssociatedData returns the associated data netcode binds to a packet.
// It is exposed for tests and tools; the hot path uses PacketAEAD.
func PacketAssociatedData(protocolID uint64, prefix byte) [PacketADBytes]byte {
	var ad [PacketADBytes]byte
	copy(ad[:], VersionInfo[:])
	binary.LittleEndian.PutUint64(ad[VersionInfoBytes:], protocolID)
	ad[PacketADBytes-1] = prefix
	return ad
}

// PrivateTokenAEAD seals and opens the private part of connect tokens with
// XChaCha20-Poly1305 under the server's private key. A server keeps one for
// its key; a token backend may keep one per goroutine. It must not be used
// concurrently.
type PrivateTokenAEAD struct {
	aead cipher.AEAD
	ad   [PrivateTokenADLen]byte
}

// NewPrivateTokenAEAD returns a PrivateTokenAEAD for the given private key.
func NewPrivateTokenAEAD(privateKey *Key) *PrivateTokenAEAD {
	a, err := chacha20poly1305.NewX(privateKey[:])
	if err != nil {
		panic("netcode/crypto: " + err.Error()) // unreachable, as in NewAEAD
	}
	t := &PrivateTokenAEAD{aead: a}
	copy(t.ad[:], VersionInfo[:])
	return t
}

func (t *PrivateTokenAEAD) setAD(protocolID, expireTimestamp uint64) []byte {
	binary.LittleEndian.PutUint64(t.ad[VersionInfoBytes:], protocolID)
	binary.LittleEndian.PutUint64(t.ad[VersionInfoBytes+8:], expireTimestamp)
	return t.ad[:]
}

// Seal appends the encryption of plaintext and its MAC to dst, bound to the
// protocol id and the token's expire timestamp.
func (t *PrivateTokenAEAD) Seal(dst []byte, nonce *[XNonceBytes]byte, protocolID, expireTimestamp uint64, plaintext []byte) []byte {
	return t.aead.Seal(dst, nonce[:], plaintext, t.setAD(protocolID, expireTimestamp))
}

// Open authenticates and decrypts a sealed private token, appending the
// plaintext to dst. It returns ErrOpen if authentication fails.
func (t *PrivateTokenAEAD) Open(dst []byte, nonce *[XNonceBytes]byte, protocolID, expireTimestamp uint64, ciphertext []byte) ([]byte, error) {
	out, err := t.aead.Open(dst, nonce[:], ciphertext, t.setAD(protocolID, expireTimestamp))
	if err != nil {
		return nil, ErrOpen
	}
	return out, nil
}

// PrivateTokenAssociatedData returns the associated data bound to a private
// connect token. It is exposed for tests and tools.
func PrivateTokenAssociatedData(protocolID, expireTimestamp uint64) [PrivateTokenADLen]byte {
	var ad [PrivateTokenADLen]byte
	copy(ad[:], VersionInfo[:])
	binary.LittleEndian.PutUint64(ad[VersionInfoBytes:], protocolID)
	binary.LittleEndian.PutUint64(ad[VersionInfoBytes+8:], expireTimestamp)
	return ad
}
