package bridge_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/token"
)

// A bridge in front of a netcode echo server. The browser's part (played
// here by a Go WebSocket client) sends its connect token as the first
// message, is told it is connected, and then every binary message is one
// payload. In a page, js/netcode.js (served by JSHandler) does this.
func ExampleHandler() {
	// The game server, and a token for it from the backend.
	const protocolID = 0x1122334455667788
	key, err := crypto.GenerateKey()
	if err != nil {
		log.Fatal(err)
	}
	l, err := netcode.Listen("udp4", "127.0.0.1:0", &netcode.ServerConfig{ProtocolID: protocolID, PrivateKey: key})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	go echoServer(l)
	server := netip.MustParseAddrPort(l.Addr().String())
	tok, err := token.Generate(&token.Params{ProtocolID: protocolID, ClientID: 1, PrivateKey: key,
		ServerAddrs: []netip.AddrPort{server}, ExpireSeconds: 30, TimeoutSeconds: 5})
	if err != nil {
		log.Fatal(err)
	}

	// The bridge dials only the servers it is told about.
	relay := bridge.NewHandler(&bridge.Config{AllowedServers: []netip.AddrPort{server}})
	defer relay.Close()
	mux := http.NewServeMux()
	mux.Handle("/relay", relay)
	mux.Handle("/netcode.js", bridge.JSHandler())
	web := httptest.NewServer(mux) // in production: an http.Server with TLS, for wss://
	defer web.Close()

	// The browser's part.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(web.URL, "http")+"/relay",
		&websocket.DialOptions{Subprotocols: []string{bridge.Subprotocol}})
	if err != nil {
		log.Fatal(err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageBinary, tok); err != nil {
		log.Fatal(err)
	}
	_, msg, err := ws.Read(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(msg))
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("hello")); err != nil {
		log.Fatal(err)
	}
	_, msg, err = ws.Read(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(msg))
	ws.Close(websocket.StatusNormalClosure, "bye")
	// Output:
	// {"type":"connected","clientIndex":0,"maxClients":256}
	// hello
}

// echoServer sends every payload back to its sender until l is closed.
func echoServer(l *netcode.Listener) {
	for {
		c, err := l.AcceptConn(context.Background())
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			buf := make([]byte, netcode.MaxPayloadBytes)
			for {
				n, err := c.Read(buf)
				if err != nil {
					return
				}
				c.Write(buf[:n])
			}
		}()
	}
}
