package cute

// Drain starts a graceful shutdown, as netcode's Listener.Drain does: from
// now on every new handshake is answered with CONNECTION_DENIED, so a
// client whose token lists other servers moves on to the next one at once
// (Cute Framework's client does too), and a client that only knows this
// server gets ErrConnectionDenied. Connected clients are not affected: let
// them finish (Stats().Connected falls to 0), then Close. Drain returns at
// once, may be called more than once, and cannot be undone. See
// docs/fleet.md for a deploy's drain.
func (l *Listener) Drain() { l.core.Drain() }

// MaxClients returns the Listener's number of client slots
// (ServerConfig.MaxClients, or its default): with Stats().Connected, the
// server's room.
func (l *Listener) MaxClients() int { return l.max }
