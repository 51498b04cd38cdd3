package core

// Drain makes the server deny every new handshake, as if every slot were
// taken: a token is answered with CONNECTION_DENIED (so a client whose
// token lists other servers moves on to the next at once) and a handshake
// in progress is denied at its challenge response. Connected clients are
// not affected. It cannot be undone.
func (s *Server) Drain() { s.draining.Store(true) }

// Draining reports whether Drain was called.
func (s *Server) Draining() bool { return s.draining.Load() }

// full reports whether a new connection is denied: every slot is taken,
// or the server drains. Call with mu held (either way).
func (s *Server) full() bool { return s.count == len(s.slots) || s.draining.Load() }
