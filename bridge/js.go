package bridge

import (
	_ "embed"
	"net/http"
	"strconv"
)

// jsSource is the browser module, js/netcode.js.
//
//go:embed js/netcode.js
var jsSource []byte

// JS returns the source of the browser module (js/netcode.js), an ES module
// with connect(url, token, options), Session (send, onmessage, onclose,
// close, bufferedAmount, transport, fallback, maxPayloadBytes),
// webTransportInfo and NetcodeError. A session runs over WebTransport when
// options.webTransport names the bridge's endpoint (package
// bridge/webtransport) and the browser reaches it, over WebSocket
// otherwise. Session.send is bounded: it throws a NetcodeError with code
// "backpressure" rather than let more than options.maxBufferedAmount bytes
// (default 1 MiB) wait in the browser, and a RangeError above the session's
// datagram limit.
func JS() []byte {
	return append([]byte(nil), jsSource...)
}

// JSHandler serves the browser module with the JavaScript content type. Mount
// it at the path the page imports, for example
//
//	mux.Handle("GET /netcode.js", bridge.JSHandler())
func JSHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/javascript; charset=utf-8")
		h.Set("Content-Length", strconv.Itoa(len(jsSource)))
		h.Set("X-Content-Type-Options", "nosniff")
		if r.Method == http.MethodHead {
			return
		}
		w.Write(jsSource)
	})
}
