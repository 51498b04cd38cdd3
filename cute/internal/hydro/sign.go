package hydro

import (
	"crypto/subtle"
	"errors"

	"filippo.io/edwards25519"
	"filippo.io/edwards25519/field"
)

// hydro_sign sizes.
const (
	PublicKeyBytes = 32 // the X25519 (Montgomery u) coordinate of scalar·B
	SecretKeyBytes = 64 // scalar ‖ public key
	SignatureBytes = 64 // nonce (a u coordinate) ‖ scalar
	SignRandBytes  = 32 // the randomness a signature draws
	SeedBytes      = 32 // a deterministic key pair's seed
	prehashBytes   = 64
)

// ErrVerify reports a signature that does not verify.
var ErrVerify = errors.New("hydro: signature does not verify")

var zeroContext [ContextBytes]byte

// scalarOf reduces a 32-byte little-endian integer modulo the group order,
// as libhydrogen's Montgomery scalar arithmetic does with its inputs.
func scalarOf(b []byte) *edwards25519.Scalar {
	var wide [64]byte
	copy(wide[:], b[:32])
	s, err := edwards25519.NewScalar().SetUniformBytes(wide[:])
	clear(wide[:])
	if err != nil {
		panic("hydro: SetUniformBytes rejected 64 bytes")
	}
	return s
}

// baseU is hydro_x25519_scalarmult_base_uniform: the Montgomery u
// coordinate of s·B for an unclamped 256-bit s, in constant time.
func baseU(out *[32]byte, s []byte) {
	k := scalarOf(s)
	p := new(edwards25519.Point).ScalarBaseMult(k)
	copy(out[:], p.BytesMontgomery())
}

// KeyPairFromScalar completes a secret key from its first 32 bytes (the
// scalar, any 32 bytes): it writes the public key into sk[32:] and pk.
func KeyPairFromScalar(sk *[SecretKeyBytes]byte, pk *[PublicKeyBytes]byte) {
	baseU(pk, sk[:32])
	copy(sk[32:], pk[:])
}

// KeyPairDeterministic is hydro_sign_keygen_deterministic: the scalar is
// RandomBufDeterministic(32, seed).
func KeyPairDeterministic(sk *[SecretKeyBytes]byte, pk *[PublicKeyBytes]byte, seed *[SeedBytes]byte) {
	RandomBufDeterministic(sk[:32], seed)
	KeyPairFromScalar(sk, pk)
}

// Prehash is the 64-byte hydro_hash of msg under ctx that a signature
// covers.
func Prehash(out *[prehashBytes]byte, msg []byte, ctx *[ContextBytes]byte) {
	h := NewHash(ctx, nil)
	h.Write(msg)
	_ = h.Sum(out[:])
}

// challenge is hydro_sign_challenge.
func challenge(out *[32]byte, nonce []byte, pk []byte, prehash *[prehashBytes]byte) {
	h := NewHash(&zeroContext, nil)
	h.Write(nonce)
	h.Write(pk)
	h.Write(prehash[:])
	_ = h.Sum(out[:])
}

// SignWith is hydro_sign_create with the randomness r given: it signs msg
// under ctx with sk and writes nonce ‖ scalar into sig. r must be fresh
// random bytes for each signature (see Sign); the output is a function of
// (r, msg, ctx, sk).
func SignWith(sig *[SignatureBytes]byte, msg []byte, ctx *[ContextBytes]byte, sk *[SecretKeyBytes]byte, r *[SignRandBytes]byte) {
	var prehash [prehashBytes]byte
	Prehash(&prehash, msg, ctx)

	var key [HashKeyBytes]byte
	copy(key[:], sk[:32])
	h := NewHash(&zeroContext, &key)
	h.Write(r[:])
	h.Write(prehash[:])
	var eph [32]byte
	_ = h.Sum(eph[:])
	clear(key[:])

	var nonce [32]byte
	baseU(&nonce, eph[:])
	var c [32]byte
	challenge(&c, nonce[:], sk[32:], &prehash)

	// scalar = eph + c·sk (mod the group order).
	e := scalarOf(eph[:])
	x := scalarOf(sk[:32])
	s := edwards25519.NewScalar().MultiplyAdd(scalarOf(c[:]), x, e)
	copy(sig[:32], nonce[:])
	copy(sig[32:], s.Bytes())
	clear(eph[:])
	e.Set(edwards25519.NewScalar())
	x.Set(edwards25519.NewScalar())
}

// Verify is hydro_sign_verify: it reports whether sig is a signature of msg
// under ctx by the holder of pk's secret key. It is stricter than
// libhydrogen's x-only check in three ways that a genuine signer never
// meets: the public key must be the canonical u coordinate of a point on
// the curve, the nonce must be a canonical encoding, and the scalar must be
// fully reduced (libhydrogen signers always produce one). So a signature
// has one encoding: it cannot be re-encoded into a "new" one.
func Verify(sig *[SignatureBytes]byte, msg []byte, ctx *[ContextBytes]byte, pk *[PublicKeyBytes]byte) error {
	a, ok := pointFromU(pk)
	if !ok {
		return ErrVerify
	}
	s, err := edwards25519.NewScalar().SetCanonicalBytes(sig[32:])
	if err != nil {
		return ErrVerify
	}
	var prehash [prehashBytes]byte
	Prehash(&prehash, msg, ctx)
	var c [32]byte
	challenge(&c, sig[:32], pk[:], &prehash)
	k := scalarOf(c[:])

	// libhydrogen compares x-only: the nonce must be u(s·B + c·A) or
	// u(s·B − c·A), which covers both points with u coordinate pk.
	nonce := sig[:32]
	var zero [32]byte
	if subtle.ConstantTimeCompare(nonce, zero[:]) == 1 {
		return ErrVerify
	}
	p := new(edwards25519.Point).VarTimeDoubleScalarBaseMult(k, a, s)
	if subtle.ConstantTimeCompare(p.BytesMontgomery(), nonce) == 1 {
		return nil
	}
	k.Negate(k)
	p.VarTimeDoubleScalarBaseMult(k, a, s)
	if subtle.ConstantTimeCompare(p.BytesMontgomery(), nonce) == 1 {
		return nil
	}
	return ErrVerify
}

// pointFromU returns a point whose Montgomery u coordinate is the
// canonical encoding u, or false if there is none on the curve.
func pointFromU(u *[32]byte) (*edwards25519.Point, bool) {
	fu, err := new(field.Element).SetBytes(u[:])
	if err != nil || subtle.ConstantTimeCompare(fu.Bytes(), u[:]) != 1 {
		return nil, false
	}
	one := new(field.Element).One()
	den := new(field.Element).Add(fu, one)
	if den.Equal(new(field.Element).Zero()) == 1 {
		return nil, false
	}
	// y = (u − 1) / (u + 1)
	y := new(field.Element).Subtract(fu, one)
	y.Multiply(y, den.Invert(den))
	p, err := new(edwards25519.Point).SetBytes(y.Bytes())
	if err != nil {
		return nil, false
	}
	return p, true
}
