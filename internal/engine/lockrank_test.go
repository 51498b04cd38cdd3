//go:build lockrank

package engine

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLockRanks: in a lockrank build, taking a lock out of the doc's
// order panics, naming both: the read turn under a write turn, a write
// turn under another, anything under a leaf; the order itself passes.
func TestLockRanks(t *testing.T) {
	cases := []struct {
		name  string
		order func()
		panic bool
	}{
		{"read turn, write turn, leaf", func() {
			rt := newReadTurn(false, nil)
			w := NewWriteTurn()
			var d Due
			if !rt.tryTake() {
				t.Fatal("turn not free")
			}
			w.Wait()
			d.mu.Lock()
			d.mu.Unlock()
			w.Give()
			rt.release(false)
		}, false},
		{"read turn under a write turn", func() {
			w := NewWriteTurn()
			w.Wait()
			defer w.Give()
			rt := newReadTurn(false, nil)
			rt.tryTake()
		}, true},
		{"two write turns", func() {
			a, b := NewWriteTurn(), NewWriteTurn()
			a.Wait()
			defer a.Give()
			b.Wait()
		}, true},
		{"a write turn under a leaf", func() {
			var k Ticker
			k.mu.Lock()
			defer k.mu.Unlock()
			NewWriteTurn().Wait()
		}, true},
		{"a call into the binding under a leaf", func() {
			var d Due
			d.mu.Lock()
			defer d.mu.Unlock()
			checkBinding(rankReadTurn)
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan any)
			go func() { // a goroutine of its own: what it holds dies with it
				defer func() { done <- recover() }()
				tc.order()
			}()
			if p := <-done; tc.panic {
				assert.Contains(t, p, "engine: lock order")
			} else {
				assert.Nil(t, p)
			}
		})
	}
}
