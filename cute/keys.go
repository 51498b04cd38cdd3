package cute

import (
	"crypto/subtle"
	"encoding/hex"

	"github.com/gonetcode/netcode/cute/internal/hydro"
)

// Key sizes.
const (
	PublicKeyBytes = hydro.PublicKeyBytes
	SecretKeyBytes = hydro.SecretKeyBytes
)

// PublicKey is the public half of the signing key pair: servers verify
// tokens with it.
type PublicKey [PublicKeyBytes]byte

// SecretKey is the secret half of the signing key pair, libhydrogen's
// layout: the 32-byte secret scalar followed by the public key. The web
// service signs tokens with it, and its first 32 bytes seal every token's
// secret section, so game servers need it too. Never ship it to clients.
type SecretKey [SecretKeyBytes]byte

// String returns the key in hex.
func (k PublicKey) String() string { return hex.EncodeToString(k[:]) }

// GoString keeps the secret out of %#v and log lines.
func (k SecretKey) GoString() string { return "cute.SecretKey{…}" }

// String keeps the secret out of %v and log lines.
func (k SecretKey) String() string { return "cute.SecretKey{…}" }

// Public returns the public half stored in the secret key.
func (k *SecretKey) Public() PublicKey { return PublicKey(k[32:]) }

// GenerateKeyPair makes a signing key pair from crypto/rand
// (hydro_sign_keygen, as cn_crypto_sign_keygen does).
func GenerateKeyPair() (PublicKey, SecretKey) {
	var sk [SecretKeyBytes]byte
	var pk [PublicKeyBytes]byte
	hydro.GenerateKeyPair(&sk, &pk)
	return pk, sk
}

// check refuses an all-zero secret key and one whose public half does not
// belong to its scalar.
func (k *SecretKey) check() error {
	var zero [32]byte
	if subtle.ConstantTimeCompare(k[:32], zero[:]) == 1 {
		return ErrZeroKey
	}
	var sk [SecretKeyBytes]byte
	var pk [PublicKeyBytes]byte
	copy(sk[:32], k[:32])
	hydro.KeyPairFromScalar(&sk, &pk)
	ok := subtle.ConstantTimeCompare(pk[:], k[32:]) == 1
	clear(sk[:])
	if !ok {
		return ErrKeyMismatch
	}
	return nil
}
