package hydro

import (
	"math/rand/v2"
	"testing"

	"github.com/gonetcode/netcode/internal/testing/vectortest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// implementation is one Gimli permutation of this build (see
// gimli_amd64_test.go and gimli_generic_test.go).
type implementation struct {
	name             string
	permute          func(*[GimliBytes]byte, byte)
	absorb           func(state *[GimliBytes]byte, tag byte, in []byte)
	encrypt, decrypt func(state *[GimliBytes]byte, tag byte, out, in []byte)
	available        bool
	flags            [2]bool // useAVX512, useAVX when it is selected
}

// generic is the portable code, the reference of the cross-checks.
var generic = implementation{"generic", gimliGeneric, absorbGeneric, encryptGeneric, decryptGeneric, true, [2]bool{}}

// TestGimliImplementations cross-checks every permutation this processor
// runs (on amd64 the SSE2, AVX and AVX-512VL assembly) against the
// portable code: on random states, on the Gimli vectors, its sponge loops
// on random states and inputs of every length up to 20 blocks (out apart
// from in, on it, and 36 bytes before it, as Open decrypts in place), and
// then on every vector of primitives.json (hash, random, secretbox, sign)
// with the package bound to it. Run with -tags purego it checks the
// portable code alone.
func TestGimliImplementations(t *testing.T) {
	p := loadPrimitives(t)
	rng := rand.New(rand.NewChaCha8([32]byte{'g', 'i', 'm', 'l', 'i'}))
	ran := 0
	for _, im := range implementations() {
		t.Run(im.name, func(t *testing.T) {
			if !im.available {
				t.Skipf("this processor lacks %s", im.name)
			}
			ran++
			var want, got [GimliBytes]byte
			for i := range 10000 {
				for j := range want {
					want[j] = byte(rng.Uint32())
				}
				got = want
				tag := byte(rng.Uint32())
				gimliGeneric(&want, tag)
				im.permute(&got, tag)
				require.Equal(t, want, got, "random state %d", i)
			}
			// A state kept across many permutations, as a sponge does.
			var chain [GimliBytes]byte
			got = chain
			for range 1000 {
				gimliGeneric(&chain, 0)
				im.permute(&got, 0)
			}
			require.Equal(t, chain, got, "after 1000 chained permutations")

			for _, c := range p.Gimli.Cases {
				var st [GimliBytes]byte
				copy(st[:], c.Input)
				for range max(c.Iterations, 1) {
					im.permute(&st, c.Tag)
				}
				assert.Equal(t, []byte(c.Output), st[:], c.Name)
			}

			testSpongeLoops(t, rng, im)

			selectImplementation(t, im)
			testPacketBoxes(t)
			TestGimliVectors(t)
			TestHashVectors(t)
			TestRandomDeterministicVectors(t)
			TestSecretboxVectors(t)
			TestSignVectors(t)
		})
	}
	require.NotZero(t, ran, "no implementation ran")
}

// testSpongeLoops compares im's absorb, encrypt and decrypt loops with the
// portable ones: the same state after, the same output, and not a byte
// written past the whole blocks.
func testSpongeLoops(t *testing.T, rng *rand.Rand, im implementation) {
	t.Helper()
	const back = HeaderBytes // Open writes the plaintext this far before the ciphertext
	fill := func(b []byte) {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	}
	for n := range 20*gimliRate + 1 {
		var start [GimliBytes]byte
		fill(start[:])
		in := make([]byte, n)
		fill(in)
		whole := n &^ (gimliRate - 1)

		want, got := start, start
		absorbGeneric(&want, tagPayload, in)
		im.absorb(&got, tagPayload, in)
		require.Equal(t, want, got, "absorb %d bytes", n)

		for _, loop := range []struct {
			name      string
			ref, impl func(*[GimliBytes]byte, byte, []byte, []byte)
		}{{"encrypt", encryptGeneric, im.encrypt}, {"decrypt", decryptGeneric, im.decrypt}} {
			wantState := start
			wantOut := make([]byte, n+1)
			wantOut[whole] = 0xa5
			loop.ref(&wantState, tagPayload, wantOut, in)
			require.Equal(t, byte(0xa5), wantOut[whole], "%s %d bytes: wrote past the whole blocks", loop.name, n)

			for _, place := range []string{"apart", "on in", "before in"} {
				buf := make([]byte, back+n+1)
				var out, src []byte
				switch place {
				case "apart":
					out, src = buf[:n+1], append([]byte(nil), in...)
				case "on in":
					src = buf[back : back+n]
					out = buf[back : back+n+1]
				case "before in":
					src = buf[back : back+n]
					out = buf[:n+1]
				}
				copy(src, in)
				if place == "apart" {
					out[whole] = 0xa5 // elsewhere out[whole] may be an input byte
				}
				state := start
				loop.impl(&state, tagPayload, out, src)
				require.Equal(t, wantState, state, "%s %d bytes, out %s: state", loop.name, n, place)
				require.Equal(t, wantOut[:whole], out[:whole], "%s %d bytes, out %s: output", loop.name, n, place)
				if place == "apart" {
					require.Equal(t, byte(0xa5), out[whole], "%s %d bytes, out %s: wrote past the whole blocks", loop.name, n, place)
				}
			}
		}
	}
}

// testPacketBoxes seals and opens the secretbox of every encrypted packet
// in packets.json (bytes 37 on: SIV, MAC, ciphertext of the body, message
// id = the sequence) with the package's current permutation.
func testPacketBoxes(t *testing.T) {
	t.Helper()
	var file struct {
		Keys    map[string]hx
		Packets []struct {
			Name          string
			Key           string
			Sequence      uint64
			IVDrawn       hx `json:"iv_drawn"`
			Bytes         hx
			BodyPlaintext hx `json:"body_plaintext"`
		}
	}
	require.NoError(t, vectortest.LoadCute(vectortest.CutePath("packets.json"), &file))
	const boxAt = 1 + 8 + 28 // type, sequence, zero padding
	ctx := ctxOf(t, "CUTE_CTX")
	checked := 0
	for _, c := range file.Packets {
		if c.Key == "" {
			continue // the connect token packet: no box of its own
		}
		key := (*[KeyBytes]byte)(file.Keys[c.Key])
		want := []byte(c.Bytes[boxAt:])
		box := make([]byte, len(c.BodyPlaintext)+HeaderBytes)
		SealIV(box, c.BodyPlaintext, c.Sequence, ctx, key, (*[IVBytes]byte)(c.IVDrawn))
		assert.Equal(t, want, box, c.Name)
		msg := make([]byte, len(c.BodyPlaintext))
		assert.NoError(t, Open(msg, want, c.Sequence, ctx, key), c.Name)
		assert.Equal(t, []byte(c.BodyPlaintext), msg, c.Name)
		checked++
	}
	require.Equal(t, 16, checked, "encrypted packets in packets.json")
}
