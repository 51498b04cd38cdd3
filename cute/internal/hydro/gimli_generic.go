//go:build !amd64 || !gc || purego

package hydro

// The portable code: no assembly for this platform, or the purego build
// tag. gimli_amd64.go documents each function.

func permute(state *[GimliBytes]byte, tag byte) { gimliGeneric(state, tag) }

func absorbBlocks(state *[GimliBytes]byte, tag byte, in []byte) { absorbGeneric(state, tag, in) }

func encryptBlocks(state *[GimliBytes]byte, tag byte, out, in []byte) {
	encryptGeneric(state, tag, out, in)
}

func decryptBlocks(state *[GimliBytes]byte, tag byte, out, in []byte) {
	decryptGeneric(state, tag, out, in)
}
