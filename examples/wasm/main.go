//go:build js && wasm

// Command wasm is a netcode client for the browser: the Go client compiled
// to WebAssembly, connected to the server end to end encrypted over the
// WebSocket transport (transport.ListenPacket, served by a
// transport.Mux). Nothing between the page and the netcode server can read the
// payloads: the WebSocket only carries netcode packets.
//
// Build it with
//
//	GOOS=js GOARCH=wasm go build -o main.wasm ./examples/wasm
//
// and load it in a page with wasm_exec.js; the server in ./server serves
// both (go run ./examples/wasm/serve).
//
// It connects over WebTransport (datagrams: a lost packet holds back
// nothing behind it) when the page's netcodeConfig.webTransport names an
// endpoint (the server's /webtransport info gives it) and the browser
// reaches it within 5 s, and over the WebSocket otherwise;
// netcodeConfig.transport ("webtransport" or "websocket") forces one.
//
// On start it POSTs to /token on its own origin for a connect token,
// connects through ws(s)://<origin>/netcode (or the page's
// netcodeConfig.url: a wire's ws(s)://host/wire/<port> carries the client
// to any netcode server on UDP, see package bridge/wire), runs a reliable.Session over
// the connection with the server's channels (package wire), checks count
// echoes on the unreliable channel of messages of every size from 1 to
// 1200 bytes, byte for byte (count is the page's netcodeConfig.count, 100
// by default), and publishes, on globalThis:
//
//	netcodeResult     a JSON string: {"clientIndex":..,"maxClients":..,"transport":"webtransport"|"websocket",
//	                  "fallback":"why not WebTransport","sent":..,"received":..,"bad":..,"error":".."}
//	netcodeEcho(text) a Promise of the server's echo of text, sent as an unreliable message
//	netcodeReliable(n) a Promise of a JSON string {"bytes":..,"sha256":"..","echoBytes":..,"intact":..,"millis":..}:
//	                  n bytes of wire.Pattern sent as one reliable message (up to
//	                  wire.MaxReliableMessage), and its echo checked byte for byte
//	netcodeClose()    closes the session and disconnects (the server frees the slot at once)
//
// and shows its progress in the element with id "status" (its data-state
// attribute ends as "done" or "error").
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall/js"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/examples/wasm/wire"
	"github.com/gonetcode/netcode/reliable"
	"github.com/gonetcode/netcode/token"
)

type result struct {
	ClientIndex int    `json:"clientIndex"`
	MaxClients  int    `json:"maxClients"`
	Transport   string `json:"transport"`          // "webtransport" or "websocket"
	Fallback    string `json:"fallback,omitempty"` // why not WebTransport, when it was offered
	Sent        int    `json:"sent"`
	Received    int    `json:"received"`
	Bad         int    `json:"bad"`
	Error       string `json:"error,omitempty"`
}

func status(state, text string) {
	el := js.Global().Get("document").Call("getElementById", "status")
	if el.IsNull() || el.IsUndefined() {
		return
	}
	el.Set("textContent", text)
	el.Call("setAttribute", "data-state", state)
}

func publish(r result) {
	b, _ := json.Marshal(r)
	js.Global().Set("netcodeResult", string(b))
}

func main() {
	r, sess, err := run()
	if err != nil {
		r.Error = err.Error()
		publish(r)
		status("error", "error: "+err.Error())
		select {} // keep the module alive for the page to inspect
	}
	serve(sess)
	publish(r)
	status("done", fmt.Sprintf("connected as client %d of %d over %s; %d of %d echoes correct",
		r.ClientIndex, r.MaxClients, r.Transport, r.Received-r.Bad, r.Sent))
	select {}
}

// payload is message i of the check: its size cycles through 1..1200.
func payload(i int) []byte {
	b := make([]byte, 1+(i*37)%netcode.MaxPayloadBytes)
	for j := range b {
		b[j] = byte(i*7 + j)
	}
	return b
}

func run() (result, *reliable.Session, error) {
	var r result
	origin := js.Global().Get("location").Get("origin").String()
	count := 100
	var wt webTransportConfig
	url := "ws" + strings.TrimPrefix(origin, "http") + "/netcode"
	if cfg := js.Global().Get("netcodeConfig"); cfg.Type() == js.TypeObject {
		if c := cfg.Get("count"); c.Type() == js.TypeNumber {
			count = c.Int()
		}
		if u := cfg.Get("url"); u.Type() == js.TypeString {
			url = u.String()
		}
		wt = readWebTransportConfig(cfg)
	}

	status("token", "fetching a connect token")
	resp, err := http.Post(origin+"/token", "application/octet-stream", nil)
	if err != nil {
		return r, nil, err
	}
	tok, err := io.ReadAll(io.LimitReader(resp.Body, token.ConnectTokenBytes+1))
	resp.Body.Close()
	if err != nil {
		return r, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return r, nil, fmt.Errorf("token endpoint: %s", resp.Status)
	}

	status("connecting", "connecting")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pc, fallback, err := listenPacket(ctx, wt, url)
	if err != nil {
		return r, nil, err
	}
	r.Transport, r.Fallback = "websocket", fallback
	if _, ok := pc.(*wtConn); ok {
		r.Transport = "webtransport"
	}
	first := pc
	d := netcode.Dialer{ListenPacket: func(ctx context.Context, _, _ string) (net.PacketConn, error) {
		if c := first; c != nil {
			first = nil
			return c, nil
		}
		c, _, err := listenPacket(ctx, wt, url) // another server of the token
		return c, err
	}}
	conn, err := d.DialContext(ctx, tok)
	if err != nil {
		pc.Close()
		return r, nil, err
	}
	r.ClientIndex, r.MaxClients = conn.ClientIndex(), conn.MaxClients()
	sess, err := reliable.NewSession(conn, wire.Config())
	if err != nil {
		conn.Close()
		return r, nil, err
	}

	status("echoing", "connected; checking echoes")
	ch := sess.Channel(wire.Unreliable)
	buf := make([]byte, wire.MaxUnreliableMessage)
	for i := range count {
		p := payload(i)
		if err := ch.Send(p); err != nil {
			sess.Close()
			return r, nil, err
		}
		r.Sent++
		ch.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := ch.Receive(buf)
		if err != nil {
			sess.Close()
			return r, nil, err
		}
		r.Received++
		if !bytes.Equal(buf[:n], p) {
			r.Bad++
		}
	}
	ch.SetReadDeadline(time.Time{})
	return r, sess, nil
}

// webTransportConfig is the page's netcodeConfig.webTransport (a URL, or
// { url, certHashes } with the SHA-256 hashes of development certificates,
// each an array of bytes) and netcodeConfig.transport ("auto",
// "webtransport" or "websocket").
type webTransportConfig struct {
	url, mode  string
	certHashes [][]byte
}

func readWebTransportConfig(cfg js.Value) webTransportConfig {
	wt := webTransportConfig{mode: "auto"}
	if m := cfg.Get("transport"); m.Type() == js.TypeString {
		wt.mode = m.String()
	}
	switch v := cfg.Get("webTransport"); v.Type() {
	case js.TypeString:
		wt.url = v.String()
	case js.TypeObject:
		wt.url = v.Get("url").String()
		if hs := v.Get("certHashes"); hs.Type() == js.TypeObject {
			for i := range hs.Get("length").Int() {
				h := hs.Index(i)
				b := make([]byte, h.Get("length").Int())
				for j := range b {
					b[j] = byte(h.Index(j).Int())
				}
				wt.certHashes = append(wt.certHashes, b)
			}
		}
	}
	return wt
}

// webTransportTimeout bounds the wait for the WebTransport endpoint
// before falling back to WebSocket.
const webTransportTimeout = 5 * time.Second

// listenPacket opens the client's transport: WebTransport when the page
// offers an endpoint and the browser reaches it, else (unless the mode is
// "webtransport") a WebSocket to wsURL. fallback says why WebTransport,
// offered, is not used.
func listenPacket(ctx context.Context, wt webTransportConfig, wsURL string) (pc net.PacketConn, fallback string, err error) {
	if wt.url != "" && wt.mode != "websocket" {
		wctx, cancel := context.WithTimeout(ctx, webTransportTimeout)
		c, err := dialWebTransport(wctx, wt.url, wt.certHashes)
		cancel()
		if err == nil {
			return c, "", nil
		}
		if wt.mode == "webtransport" {
			return nil, "", err
		}
		fallback = err.Error()
	}
	c, err := transport.Dial(ctx, wsURL, nil)
	if err != nil {
		return nil, fallback, err
	}
	return c, fallback, nil
}

// reliableResult is what netcodeReliable resolves to.
type reliableResult struct {
	Bytes     int    `json:"bytes"`
	SHA256    string `json:"sha256"` // of the message sent
	EchoBytes int    `json:"echoBytes"`
	Intact    bool   `json:"intact"` // the echo is the message, byte for byte
	Millis    int64  `json:"millis"` // from Send to the echo's arrival
}

// reliableEcho sends n bytes of wire.Pattern as one message on the
// reliable channel and checks the echo.
func reliableEcho(ch *reliable.Channel, n int) (reliableResult, error) {
	if n < 1 || n > wire.MaxReliableMessage {
		return reliableResult{}, fmt.Errorf("netcodeReliable: %d bytes; it takes 1 to %d", n, wire.MaxReliableMessage)
	}
	msg := wire.Pattern(n)
	sum := sha256.Sum256(msg)
	res := reliableResult{Bytes: n, SHA256: hex.EncodeToString(sum[:])}
	start := time.Now()
	ch.SetWriteDeadline(start.Add(10 * time.Second))
	ch.SetReadDeadline(start.Add(10 * time.Second))
	defer ch.SetWriteDeadline(time.Time{})
	defer ch.SetReadDeadline(time.Time{})
	if err := ch.Send(msg); err != nil {
		return res, err
	}
	buf := make([]byte, wire.MaxReliableMessage)
	m, err := ch.Receive(buf)
	if err != nil {
		return res, err
	}
	res.Millis = time.Since(start).Milliseconds()
	res.EchoBytes = m
	res.Intact = bytes.Equal(buf[:m], msg)
	return res, nil
}

// serve publishes netcodeEcho, netcodeReliable and netcodeClose.
func serve(sess *reliable.Session) {
	var umu, rmu sync.Mutex // one echo at a time on each channel
	promise := func(f func() (string, error)) js.Value {
		var exec js.Func
		exec = js.FuncOf(func(this js.Value, args []js.Value) any {
			resolve, reject := args[0], args[1]
			go func() {
				defer exec.Release()
				s, err := f()
				if err != nil {
					reject.Invoke(js.Global().Get("Error").New(err.Error()))
					return
				}
				resolve.Invoke(s)
			}()
			return nil
		})
		return js.Global().Get("Promise").New(exec)
	}
	js.Global().Set("netcodeEcho", js.FuncOf(func(this js.Value, args []js.Value) any {
		text := ""
		if len(args) > 0 {
			text = args[0].String()
		}
		return promise(func() (string, error) {
			umu.Lock()
			defer umu.Unlock()
			ch := sess.Channel(wire.Unreliable)
			if err := ch.Send([]byte(text)); err != nil {
				return "", err
			}
			buf := make([]byte, wire.MaxUnreliableMessage)
			ch.SetReadDeadline(time.Now().Add(5 * time.Second))
			defer ch.SetReadDeadline(time.Time{})
			n, err := ch.Receive(buf)
			if err != nil {
				return "", err
			}
			return string(buf[:n]), nil
		})
	}))
	js.Global().Set("netcodeReliable", js.FuncOf(func(this js.Value, args []js.Value) any {
		n := 0
		if len(args) > 0 && args[0].Type() == js.TypeNumber {
			n = args[0].Int()
		}
		return promise(func() (string, error) {
			rmu.Lock()
			defer rmu.Unlock()
			res, err := reliableEcho(sess.Channel(wire.Reliable), n)
			if err != nil {
				return "", err
			}
			b, err := json.Marshal(res)
			return string(b), err
		})
	}))
	js.Global().Set("netcodeClose", js.FuncOf(func(this js.Value, args []js.Value) any {
		return promise(func() (string, error) {
			if err := sess.Close(); err != nil {
				return "", err
			}
			status("closed", "disconnected")
			return "closed", nil
		})
	}))
}
