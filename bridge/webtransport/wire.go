package webtransport

import (
	"net/http"

	"github.com/coder/websocket"
	"github.com/quic-go/quic-go"

	"github.com/gonetcode/netcode/bridge/internal/wsbridge"
)

// serveAdmitted serves a session of a host that admits by its own rules
// (the wire's): the origin (as for every session of the Server), one
// session a connection, then the host's answer, a refusal in its terms.
func (s *Server) serveAdmitted(w http.ResponseWriter, r *http.Request, host wsbridge.Admitter) {
	g := host.Gate()
	originOK := originAllowed(r, g.Accept.OriginPatterns)
	conn, _ := r.Context().Value(connKey{}).(*quic.Conn)
	if originOK {
		var claimed bool
		if conn, claimed = s.claimSession(r); !claimed {
			// One session a connection: it ends with the session.
			http.Error(w, "netcode/bridge: one session per connection", http.StatusBadRequest)
			return
		}
	}
	a := host.Admit(r, originOK)
	if a.Start == nil {
		defer a.Release()
		s.refuseWith(w, r, g, conn, a)
		return
	}
	sess, err := s.wt.Upgrade(w, r)
	if err != nil {
		a.Release()
		s.log.Debug("netcode/bridge: WebTransport upgrade failed", "remote", r.RemoteAddr, "err", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	l := newLink(sess, conn)
	l.page = r.Header.Get("Origin") != ""
	if !g.Start(func() { a.Start(l) }) {
		wsbridge.CloseLink(l, websocket.StatusGoingAway, wsbridge.ErrClosed.Error())
		a.Release()
	}
}

// refuseWith answers a refusal: a session opened and closed at once with
// its code, or plain HTTP when it has none or many refusals are in
// progress.
func (s *Server) refuseWith(w http.ResponseWriter, r *http.Request, g *wsbridge.Gate, conn *quic.Conn, a wsbridge.Admission) {
	if a.Refused != "" {
		w.Header().Set(wsbridge.RefusedHeader, a.Refused)
	}
	upgrade, done := g.Refusal()
	defer done()
	if a.Code == 0 || !upgrade {
		if a.Status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		http.Error(w, a.Reason, a.Status)
		return
	}
	sess, err := s.wt.Upgrade(w, r)
	if err != nil {
		w.WriteHeader(a.Status)
		return
	}
	l := newLink(sess, conn)
	l.page = r.Header.Get("Origin") != ""
	wsbridge.CloseLink(l, a.Code, a.Reason)
}
