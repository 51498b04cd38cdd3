package netcode

// MaxClients returns the Listener's number of client slots
// (ServerConfig.MaxClients, or its default): with Stats().Connected, what
// a registry of servers (package fleet) reports as the server's room.
func (l *Listener) MaxClients() int { return l.cfg.MaxClients }
