package hydro

import "encoding/binary"

// RandomBufDeterministic is hydro_random_buf_deterministic: it fills out
// with bytes derived from seed alone (a Gimli sponge over the output
// length and the seed). The same seed and length always give the same
// bytes.
func RandomBufDeterministic(out []byte, seed *[SeedBytes]byte) {
	var st [GimliBytes]byte
	copy(st[:], []byte{7, 'd', 'r', 'b', 'g', '2', '5', '6'})
	binary.LittleEndian.PutUint64(st[8:], uint64(len(out)))
	Gimli(&st, 1)
	for i := 0; i < gimliRate; i++ {
		st[i] ^= seed[i]
	}
	Gimli(&st, 2)
	for i := 0; i < gimliRate; i++ {
		st[i] ^= seed[gimliRate+i]
	}
	Gimli(&st, 2)
	for len(out) > 0 {
		Gimli(&st, 0)
		out = out[copy(out, st[:gimliRate]):]
	}
	clear(st[:])
}
