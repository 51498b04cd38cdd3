//go:build amd64 && gc && !purego

package hydro

import "golang.org/x/sys/cpu"

// implementations lists the assembly permutations and whether this
// processor runs them, each with the choice of permute that selects it.
func implementations() []implementation {
	return []implementation{
		{"SSE2", gimliSSE2, absorbSSE2, encryptSSE2, decryptSSE2, true, [2]bool{false, false}},
		{"AVX", gimliAVX, absorbAVX, encryptAVX, decryptAVX, cpu.X86.HasAVX, [2]bool{false, true}},
		{"AVX-512VL", gimliAVX512, absorbAVX512, encryptAVX512, decryptAVX512, cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL, [2]bool{true, true}},
	}
}

// selectImplementation makes permute use im until the test ends.
func selectImplementation(t interface{ Cleanup(func()) }, im implementation) {
	avx512, avx := useAVX512, useAVX
	t.Cleanup(func() { useAVX512, useAVX = avx512, avx })
	useAVX512, useAVX = im.flags[0], im.flags[1]
}
