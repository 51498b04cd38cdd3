//go:build !lockrank

package engine

// Without the lockrank build tag the lock-order checks cost nothing
// (lockrank.go has them).

type rank int

const (
	rankReadTurn rank = iota + 1
	rankWriteTurn
	rankLeaf
)

func acquire(rank)      {}
func release(rank)      {}
func checkBinding(rank) {}
