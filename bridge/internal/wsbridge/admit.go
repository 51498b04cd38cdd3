package wsbridge

import (
	"net/http"

	"github.com/coder/websocket"
)

// Admitter is a Host whose admission depends on the request beyond its
// Gate's cap: the wire's (package bridge/wire), whose URL path names the
// target and which caps sessions per source address too. A server of
// another kind of session (package bridge/webtransport) asks it, in place
// of Gate.Enter, once the request is known to be a session's.
type Admitter interface {
	Host
	// Admit decides on r; originOK says whether the page's origin passed
	// the server's own rule (a refusal the Admitter counts).
	Admit(r *http.Request, originOK bool) Admission
}

// Admission is an Admitter's answer to a session's request.
type Admission struct {
	// Start, if not nil, starts the admitted session over l; call it
	// from Gate.Start. The session releases its slot itself once it has
	// ended.
	Start func(l Link)
	// Release frees what admission took: call it if Start is not called
	// (the upgrade failed, or Gate.Start refused), or once a refusal has
	// been answered. Later calls do nothing.
	Release func()
	// A refusal (Start nil) is answered in the session's own terms when
	// Code is not 0 and Gate.Refusal allows it: the session is opened and
	// closed at once with Code and Reason. Otherwise, and when Code is 0,
	// it is answered with HTTP Status and Reason. Refused, if set, is the
	// value of the RefusedHeader either way.
	Code    websocket.StatusCode
	Reason  string
	Status  int
	Refused string
}
