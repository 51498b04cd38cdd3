//go:build !amd64 || !gc || purego

package hydro

// implementations lists the permutations of this build: the portable one
// only, so the cross-check compares it with itself and runs the vectors.
func implementations() []implementation {
	return []implementation{generic}
}

// selectImplementation: there is nothing to choose in this build.
func selectImplementation(interface{ Cleanup(func()) }, implementation) {}
