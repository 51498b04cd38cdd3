package hydro

import "encoding/binary"

// The portable sponge loops over whole blocks: the fallback where there is
// no assembly, and the reference the assembly is tested against. Each
// reads a whole block of in before it writes that block of out, so out may
// sit on in or before it.

func absorbGeneric(state *[GimliBytes]byte, tag byte, in []byte) {
	for ; len(in) >= gimliRate; in = in[gimliRate:] {
		r0, r1 := rate(state)
		setRate(state, r0^binary.LittleEndian.Uint64(in), r1^binary.LittleEndian.Uint64(in[8:]))
		gimliGeneric(state, tag)
	}
}

func encryptGeneric(state *[GimliBytes]byte, tag byte, out, in []byte) {
	for ; len(in) >= gimliRate; in, out = in[gimliRate:], out[gimliRate:] {
		r0, r1 := rate(state)
		c0, c1 := r0^binary.LittleEndian.Uint64(in), r1^binary.LittleEndian.Uint64(in[8:])
		binary.LittleEndian.PutUint64(out[8:gimliRate], c1)
		binary.LittleEndian.PutUint64(out, c0)
		setRate(state, c0, c1)
		gimliGeneric(state, tag)
	}
}

func decryptGeneric(state *[GimliBytes]byte, tag byte, out, in []byte) {
	for ; len(in) >= gimliRate; in, out = in[gimliRate:], out[gimliRate:] {
		r0, r1 := rate(state)
		c0, c1 := binary.LittleEndian.Uint64(in), binary.LittleEndian.Uint64(in[8:])
		binary.LittleEndian.PutUint64(out[8:gimliRate], r1^c1)
		binary.LittleEndian.PutUint64(out, r0^c0)
		setRate(state, c0, c1)
		gimliGeneric(state, tag)
	}
}

// rate returns the first 16 bytes of the state as two little-endian words.
func rate(state *[GimliBytes]byte) (uint64, uint64) {
	return binary.LittleEndian.Uint64(state[:]), binary.LittleEndian.Uint64(state[8:])
}

// setRate sets the first 16 bytes of the state.
func setRate(state *[GimliBytes]byte, r0, r1 uint64) {
	binary.LittleEndian.PutUint64(state[:], r0)
	binary.LittleEndian.PutUint64(state[8:], r1)
}
