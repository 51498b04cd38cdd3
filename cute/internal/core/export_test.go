package core

import (
	"encoding/binary"

	"github.com/gonetcode/netcode/cute/internal/hydro"
)

// scripted is a test entropy source: it hands out recorded draws in
// order, each for a request of its exact length, and once they run out a
// deterministic stream. It is the only way to make a core's output
// reproducible, and it exists only in this package's tests.
type scripted struct {
	draws   [][]byte
	counter uint64
	seed    [hydro.SeedBytes]byte
	misfits int // requests whose length did not match the next draw
}

func (s *scripted) read(b []byte) {
	if len(s.draws) > 0 {
		d := s.draws[0]
		if len(d) == len(b) {
			copy(b, d)
			s.draws = s.draws[1:]
			return
		}
		s.misfits++
	}
	s.counter++
	binary.LittleEndian.PutUint64(s.seed[:], s.counter)
	hydro.RandomBufDeterministic(b, &s.seed)
}

// setEntropy replaces a core's random source, for tests only: the IVs
// too are drawn from it, each as it is needed.
func (c *Client) setEntropy(e entropy) { c.rand, c.ivDirect = e, true }
func (s *Server) setEntropy(e entropy) { s.rand, s.ivDirect = e, true }
