package fleet

import (
	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/cute"
)

// CuteSource is a Cute server as a Source, so that a fleet of Cute
// Framework game servers registers, drains and is chosen as a netcode one
// is: Register(ctx, CuteSource(l), cfg) with cfg.ProtocolID set to the
// server's application id (cute.ServerConfig.ApplicationID), a Chooser of
// that id, and a backend minting Cute tokens (backend.Config.Cute) with
// the Chooser's ChooseServers. Server.Drain drains the Listener
// (cute.Listener.Drain) and marks the entry, as for netcode's.
func CuteSource(l *cute.Listener) Source { return cuteSource{l} }

// cuteSource reports what the registry's entry carries of a Cute
// Listener's Stats: the clients connected and whether it drains.
type cuteSource struct{ *cute.Listener }

func (s cuteSource) Stats() netcode.ServerStats {
	st := s.Listener.Stats()
	return netcode.ServerStats{Connected: st.Connected, Draining: st.Draining}
}
