//go:build js && wasm

// Command wasm is a netcode client for the browser: the Go client compiled
// to WebAssembly, connected to the server end to end encrypted over the
// WebSocket transport (bridge.TransportListenPacket, served by a
// bridge.Mux). Nothing between the page and the netcode server can read the
// payloads: the WebSocket only carries netcode packets.
//
// Build it with
//
//	GOOS=js GOARCH=wasm go build -o main.wasm ./examples/wasm
//
// and load it in a page with wasm_exec.js; the server in ./server serves
// both (go run ./examples/wasm/serve).
//
// On start it POSTs to /token on its own origin for a connect token,
// connects through ws(s)://<origin>/netcode, checks count echoes of
// payloads of every size byte for byte (count is the page's
// netcodeConfig.count, 100 by default), and publishes, on globalThis:
//
//	netcodeResult  a JSON string: {"clientIndex":..,"maxClients":..,"sent":..,"received":..,"bad":..,"error":".."}
//	netcodeEcho(text) a Promise of the server's echo of text
//	netcodeClose()    disconnects (the server frees the slot at once)
//
// and shows its progress in the element with id "status" (its data-state
// attribute ends as "done" or "error").
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall/js"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge"
)

type result struct {
	ClientIndex int    `json:"clientIndex"`
	MaxClients  int    `json:"maxClients"`
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
	r, conn, err := run()
	if err != nil {
		r.Error = err.Error()
		publish(r)
		status("error", "error: "+err.Error())
		select {} // keep the module alive for the page to inspect
	}
	serve(conn)
	publish(r)
	status("done", fmt.Sprintf("connected as client %d of %d; %d of %d echoes correct",
		r.ClientIndex, r.MaxClients, r.Received-r.Bad, r.Sent))
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

func run() (result, *netcode.Conn, error) {
	var r result
	origin := js.Global().Get("location").Get("origin").String()
	count := 100
	if cfg := js.Global().Get("netcodeConfig"); cfg.Type() == js.TypeObject {
		if c := cfg.Get("count"); c.Type() == js.TypeNumber {
			count = c.Int()
		}
	}

	status("token", "fetching a connect token")
	resp, err := http.Post(origin+"/token", "application/octet-stream", nil)
	if err != nil {
		return r, nil, err
	}
	tok, err := io.ReadAll(io.LimitReader(resp.Body, netcode.ConnectTokenBytes+1))
	resp.Body.Close()
	if err != nil {
		return r, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return r, nil, fmt.Errorf("token endpoint: %s", resp.Status)
	}

	status("connecting", "connecting")
	url := "ws" + strings.TrimPrefix(origin, "http") + "/netcode"
	d := netcode.Dialer{ListenPacket: bridge.TransportListenPacket(url, nil)}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, tok)
	if err != nil {
		return r, nil, err
	}
	r.ClientIndex, r.MaxClients = conn.ClientIndex(), conn.MaxClients()

	status("echoing", "connected; checking echoes")
	buf := make([]byte, netcode.MaxPayloadBytes)
	for i := range count {
		p := payload(i)
		if _, err := conn.Write(p); err != nil {
			conn.Close()
			return r, nil, err
		}
		r.Sent++
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := conn.Read(buf)
		if err != nil {
			conn.Close()
			return r, nil, err
		}
		r.Received++
		if !bytes.Equal(buf[:n], p) {
			r.Bad++
		}
	}
	conn.SetReadDeadline(time.Time{})
	return r, conn, nil
}

// serve publishes netcodeEcho and netcodeClose.
func serve(conn *netcode.Conn) {
	var mu sync.Mutex // one echo at a time
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
			mu.Lock()
			defer mu.Unlock()
			if _, err := conn.Write([]byte(text)); err != nil {
				return "", err
			}
			buf := make([]byte, netcode.MaxPayloadBytes)
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			defer conn.SetReadDeadline(time.Time{})
			n, err := conn.Read(buf)
			if err != nil {
				return "", err
			}
			return string(buf[:n]), nil
		})
	}))
	js.Global().Set("netcodeClose", js.FuncOf(func(this js.Value, args []js.Value) any {
		return promise(func() (string, error) {
			if err := conn.Close(); err != nil {
				return "", err
			}
			status("closed", "disconnected")
			return "closed", nil
		})
	}))
}
