// Package hydro implements the parts of libhydrogen 1.0 that the Cute
// Protocol uses, byte for byte as Cute Framework's cute_net.h embeds them:
// the Gimli permutation, hydro_hash (keyed and unkeyed), hydro_secretbox
// (a synthetic-IV construction on Gimli) and hydro_sign (Schnorr signatures
// over Curve25519 with Gimli hashing).
//
// Nothing here allocates per call except key-pair generation, and nothing
// branches on or indexes by secret data. The group arithmetic of hydro_sign
// comes from filippo.io/edwards25519.
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
// little-endian words.
func Gimli(state *[GimliBytes]byte, tag byte) {
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

// gimliCore is the Gimli permutation on 12 words.
func gimliCore(s *[12]uint32) {
	for round := uint32(24); round > 0; round-- {
		for c := 0; c < 4; c++ {
			x := bits.RotateLeft32(s[c], 24)
			y := bits.RotateLeft32(s[4+c], 9)
			z := s[8+c]
			s[8+c] = x ^ (z << 1) ^ ((y & z) << 2)
			s[4+c] = y ^ x ^ ((x | z) << 1)
			s[c] = z ^ y ^ ((x & y) << 3)
		}
		switch round & 3 {
		case 0:
			s[0], s[1] = s[1], s[0]
			s[2], s[3] = s[3], s[2]
			s[0] ^= 0x9e377900 | round
		case 2:
			s[0], s[2] = s[2], s[0]
			s[1], s[3] = s[3], s[1]
		}
	}
}

// pad is libhydrogen's gimli_pad_u8.
func pad(state *[GimliBytes]byte, pos int, domain byte) {
	state[pos] ^= domain<<1 | 1
	state[gimliRate-1] ^= 0x80
}
