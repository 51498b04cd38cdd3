// Package hydro implements the parts of libhydrogen 1.0 that the Cute
// Protocol uses, byte for byte as Cute Framework's cute_net.h embeds them:
// the Gimli permutation, hydro_hash (keyed and unkeyed), hydro_secretbox
// (a synthetic-IV construction on Gimli) and hydro_sign (Schnorr signatures
// over Curve25519 with Gimli hashing).
//
// Nothing here allocates per call except key-pair generation, and nothing
// branches on or indexes by secret data. The group arithmetic of hydro_sign
// comes from filippo.io/edwards25519.
//
// On amd64 the permutation and the sponge loops over whole blocks run in
// assembly (SSE2, AVX or AVX-512VL, whichever is widest), in
// gimli_amd64.s, generated with avo as golang.org/x/crypto generates its
// assembly: to regenerate it, run go generate in the _asm directory, a
// module of its own so that avo never enters this module's build graph.
// Elsewhere, or with the purego build tag, the portable Go code runs; the
// tests cross-check the two.
package hydro

import (
	"encoding/binary"
	"math/bits"
)

// GimliBytes is the size of the Gimli state.
const GimliBytes = 48

// gimliRate is the sponge rate: the bytes absorbed or squeezed per
// permutation.
const gimliRate = 16

// libhydrogen's domain-separation tags, XORed into the last state byte
// before a permutation.
const (
	tagHeader  = 0x01
	tagPayload = 0x02
	tagFinal   = 0x08
	tagFinal0  = 0xf8
	tagKey0    = 0xfe
	tagKey     = 0xff
)

// Padding domains.
const (
	domainAEAD = 0x0
	domainXOF  = 0xf
)

// Gimli applies libhydrogen's gimli_core_u8: it XORs tag into the last
// byte of the state, then applies the 24-round Gimli permutation to the 12
// little-endian words (in assembly on amd64, see gimli_amd64.go).
func Gimli(state *[GimliBytes]byte, tag byte) {
	permute(state, tag)
}

// gimliGeneric is the portable gimli_core_u8: the fallback where there is
// no assembly, and the reference the assembly is tested against.
func gimliGeneric(state *[GimliBytes]byte, tag byte) {
	state[GimliBytes-1] ^= tag
	var s [12]uint32
	for i := range s {
		s[i] = binary.LittleEndian.Uint32(state[4*i:])
	}
	gimliCore(&s)
	for i := range s {
		binary.LittleEndian.PutUint32(state[4*i:], s[i])
	}
}

// gimliCore is the Gimli permutation on 12 words: 24 rounds, four at a
// time (each round's SP-box on the four columns, then the small swap with
// the round constant every fourth round and the big swap two rounds
// later), with the state in locals so that it stays in registers.
func gimliCore(s *[12]uint32) {
	x0, x1, x2, x3 := s[0], s[1], s[2], s[3]
	y0, y1, y2, y3 := s[4], s[5], s[6], s[7]
	z0, z1, z2, z3 := s[8], s[9], s[10], s[11]
	for round := uint32(24); round > 0; round -= 4 {
		x0, y0, z0 = spbox(x0, y0, z0)
		x1, y1, z1 = spbox(x1, y1, z1)
		x2, y2, z2 = spbox(x2, y2, z2)
		x3, y3, z3 = spbox(x3, y3, z3)
		// round % 4 == 0: small swap and the round constant.
		x0, x1, x2, x3 = x1^(0x9e377900|round), x0, x3, x2

		x0, y0, z0 = spbox(x0, y0, z0)
		x1, y1, z1 = spbox(x1, y1, z1)
		x2, y2, z2 = spbox(x2, y2, z2)
		x3, y3, z3 = spbox(x3, y3, z3)

		x0, y0, z0 = spbox(x0, y0, z0)
		x1, y1, z1 = spbox(x1, y1, z1)
		x2, y2, z2 = spbox(x2, y2, z2)
		x3, y3, z3 = spbox(x3, y3, z3)
		// round % 4 == 2: big swap.
		x0, x1, x2, x3 = x2, x3, x0, x1

		x0, y0, z0 = spbox(x0, y0, z0)
		x1, y1, z1 = spbox(x1, y1, z1)
		x2, y2, z2 = spbox(x2, y2, z2)
		x3, y3, z3 = spbox(x3, y3, z3)
	}
	s[0], s[1], s[2], s[3] = x0, x1, x2, x3
	s[4], s[5], s[6], s[7] = y0, y1, y2, y3
	s[8], s[9], s[10], s[11] = z0, z1, z2, z3
}

// spbox is Gimli's SP-box on one column.
func spbox(a, b, c uint32) (uint32, uint32, uint32) {
	x := bits.RotateLeft32(a, 24)
	y := bits.RotateLeft32(b, 9)
	z := c
	return z ^ y ^ ((x & y) << 3), y ^ x ^ ((x | z) << 1), x ^ (z << 1) ^ ((y & z) << 2)
}

// xorBytes XORs src into dst (at least as long) and returns len(src): the
// partial blocks at the ends of the sponge loops.
func xorBytes(dst, src []byte) int {
	dst = dst[:len(src)]
	for i := range src {
		dst[i] ^= src[i]
	}
	return len(src)
}

// pad is libhydrogen's gimli_pad_u8.
func pad(state *[GimliBytes]byte, pos int, domain byte) {
	state[pos] ^= domain<<1 | 1
	state[gimliRate-1] ^= 0x80
}
