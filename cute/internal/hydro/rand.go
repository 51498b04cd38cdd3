package hydro

import "crypto/rand"

// Seal is hydro_secretbox_encrypt: SealIV with an IV drawn from
// crypto/rand, as libhydrogen draws it from its system-seeded generator.
// Because the IV is fresh, sealing the same message twice under the same
// key and message id gives unrelated boxes.
func Seal(box, msg []byte, msgID uint64, ctx *[ContextBytes]byte, key *[KeyBytes]byte) {
	var iv [IVBytes]byte
	randRead(iv[:])
	SealIV(box, msg, msgID, ctx, key, &iv)
}

// Sign is hydro_sign_create: SignWith with randomness from crypto/rand.
func Sign(sig *[SignatureBytes]byte, msg []byte, ctx *[ContextBytes]byte, sk *[SecretKeyBytes]byte) {
	var r [SignRandBytes]byte
	randRead(r[:])
	SignWith(sig, msg, ctx, sk, &r)
	clear(r[:])
}

// GenerateKeyPair is hydro_sign_keygen: a random scalar and its public
// key.
func GenerateKeyPair(sk *[SecretKeyBytes]byte, pk *[PublicKeyBytes]byte) {
	randRead(sk[:32])
	KeyPairFromScalar(sk, pk)
}

// randRead fills b from crypto/rand, which never fails (it crashes the
// program if the system's generator is unusable).
func randRead(b []byte) {
	_, _ = rand.Read(b)
}
