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
// The types here keep scratch space for nonces and associated data so that the
// hot path never allocates; for that reason a value of any of them must not be
// used by more than one goroutine at a time.
package crypto

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/gonetcode/netcode/internal/aead"
)

// Sizes used by the netcode 1.02 encryption.
const (
	KeyBytes        = chacha20poly1305.KeySize    // 32: every key
	MACBytes        = chacha20poly1305.Overhead   // 16: the tag that ends every sealed part
	TokenNonceBytes = chacha20poly1305.NonceSizeX // 24: the nonce of a connect token's private part

	packetADBytes = len(VersionInfo) + 8 + 1 // version info, protocol id, prefix byte
	tokenADBytes  = len(VersionInfo) + 8 + 8 // version info, protocol id, expire timestamp
	versionBytes  = len(VersionInfo)         // 13
)

// VersionInfo is the 13-byte protocol version string, NUL terminated, that
// starts every connect token and connection request and every associated data.
const VersionInfo = "NETCODE 1.02\x00"

// ErrOpen is returned when a ciphertext does not authenticate: wrong key, wrong
// nonce, wrong associated data, or tampered bytes.
var ErrOpen = aead.ErrOpen

// Key is a 256-bit symmetric key.
type Key [KeyBytes]byte

// GenerateKey returns a new key from the operating system's secure random source.
func GenerateKey() (Key, error) {
	var k Key
	_, err := rand.Read(k[:])
	return k, err
}

// PacketAEAD seals and opens netcode packets for one direction of one
// connection: the key, the protocol id and the version info are fixed when it
// is made; the prefix byte and the sequence number come with each packet.
// A PacketAEAD must not be used concurrently.
type PacketAEAD struct {
	aead *aead.AEAD
	ad   [packetADBytes]byte
}

// NewPacketAEAD returns a PacketAEAD for key and protocolID.
func NewPacketAEAD(key *Key, protocolID uint64) *PacketAEAD {
	p := &PacketAEAD{aead: aead.New(key)}
	copy(p.ad[:], VersionInfo)
	binary.LittleEndian.PutUint64(p.ad[versionBytes:], protocolID)
	return p
}

// Seal appends the encryption of plaintext, authenticated together with the
// packet's prefix byte, followed by the MAC, to dst.
func (p *PacketAEAD) Seal(dst []byte, prefix byte, sequence uint64, plaintext []byte) []byte {
	p.ad[packetADBytes-1] = prefix
	return p.aead.Seal(dst, sequence, plaintext, p.ad[:])
}

// Open authenticates ciphertext (ending with the MAC) against the packet's
// prefix byte and sequence number, and appends the plaintext to dst.
func (p *PacketAEAD) Open(dst []byte, prefix byte, sequence uint64, ciphertext []byte) ([]byte, error) {
	p.ad[packetADBytes-1] = prefix
	return p.aead.Open(dst, sequence, ciphertext, p.ad[:])
}

// PrivateTokenAEAD seals and opens the private part of connect tokens with
// XChaCha20-Poly1305 under the server's private key. A server keeps one for
// its key; a token backend may keep one per goroutine. It must not be used
// concurrently.
type PrivateTokenAEAD struct {
	aead cipher.AEAD
	ad   [tokenADBytes]byte
}

// NewPrivateTokenAEAD returns a PrivateTokenAEAD for the given private key.
func NewPrivateTokenAEAD(privateKey *Key) *PrivateTokenAEAD {
	a, err := chacha20poly1305.NewX(privateKey[:])
	if err != nil {
		panic("netcode/crypto: " + err.Error()) // unreachable: the key has the right size
	}
	t := &PrivateTokenAEAD{aead: a}
	copy(t.ad[:], VersionInfo)
	return t
}

func (t *PrivateTokenAEAD) setAD(protocolID, expireTimestamp uint64) []byte {
	binary.LittleEndian.PutUint64(t.ad[versionBytes:], protocolID)
	binary.LittleEndian.PutUint64(t.ad[versionBytes+8:], expireTimestamp)
	return t.ad[:]
}

// Seal appends the encryption of plaintext and its MAC to dst, bound to the
// protocol id and the token's expire timestamp.
func (t *PrivateTokenAEAD) Seal(dst []byte, nonce *[TokenNonceBytes]byte, protocolID, expireTimestamp uint64, plaintext []byte) []byte {
	return t.aead.Seal(dst, nonce[:], plaintext, t.setAD(protocolID, expireTimestamp))
}

// Open authenticates and decrypts a sealed private token, appending the
// plaintext to dst. It returns ErrOpen if authentication fails.
func (t *PrivateTokenAEAD) Open(dst []byte, nonce *[TokenNonceBytes]byte, protocolID, expireTimestamp uint64, ciphertext []byte) ([]byte, error) {
	out, err := t.aead.Open(dst, nonce[:], ciphertext, t.setAD(protocolID, expireTimestamp))
	if err != nil {
		return nil, ErrOpen
	}
	return out, nil
}
