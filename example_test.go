package netcode_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/token"
)

// A server and a client on loopback: the client connects with a token,
// sends a payload, and the server echoes it.
func Example() {
	const protocolID = 0x1122334455667788
	key, err := crypto.GenerateKey()
	if err != nil {
		log.Fatal(err)
	}
	l, err := netcode.Listen("udp", "127.0.0.1:0", &netcode.ServerConfig{
		ProtocolID: protocolID,
		PrivateKey: key,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		buf := make([]byte, netcode.MaxPayloadBytes)
		n, err := conn.Read(buf)
		if err == nil {
			conn.Write(buf[:n])
		}
	}()

	// The token backend mints a token for the client.
	tok, err := token.Generate(&token.Params{
		ProtocolID:     protocolID,
		ClientID:       42,
		PrivateKey:     key,
		ServerAddrs:    []netip.AddrPort{netip.MustParseAddrPort(l.Addr().String())},
		ExpireSeconds:  30,
		TimeoutSeconds: 5,
	})
	if err != nil {
		log.Fatal(err)
	}

	conn, err := netcode.Dial(tok)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("hello"))
	buf := make([]byte, netcode.MaxPayloadBytes)
	n, err := conn.Read(buf)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s from slot %d of %d\n", buf[:n], conn.ClientIndex(), conn.MaxClients())
	// Output: hello from slot 0 of 256
}

// A game server: Listen on a public port, Accept each client that completes
// the handshake, and serve it on a goroutine of its own. The token backend
// names the server by PublicAddr in its tokens. (This example needs port
// 40000 and runs until stopped, so it is compiled but not run.)
func ExampleListen() {
	var key crypto.Key // from "netcode keygen", shared with the token backend only
	l, err := netcode.Listen("udp", "0.0.0.0:40000", &netcode.ServerConfig{
		ProtocolID: 0x1122334455667788,
		PrivateKey: key,
		PublicAddr: "203.0.113.7:40000", // what the tokens name; the bound address if empty
		MaxClients: 1024,
		Logger:     slog.Default(), // debug records of connects and disconnects; nil is silent
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close() // disconnects every client cleanly
	for {
		conn, err := l.Accept()
		if err != nil {
			return // net.ErrClosed after Close
		}
		go func() {
			defer conn.Close()
			c := conn.(*netcode.Conn)
			log.Printf("client %d in slot %d", c.ClientID(), c.ClientIndex())
			buf := make([]byte, netcode.MaxPayloadBytes)
			for {
				n, err := c.Read(buf) // one payload; io.EOF when the client disconnects
				if err != nil {
					return
				}
				c.Write(buf[:n])
			}
		}()
	}
}

// A game client: fetch a connect token from the token backend after login,
// connect, and tell the failures apart with errors.Is. (This example needs
// a backend and a server, so it is compiled but not run.)
func ExampleDial() {
	tok, err := fetchToken("https://backend.example.com/token")
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := netcode.DialContext(ctx, tok)
	switch {
	case errors.Is(err, netcode.ErrConnectionDenied):
		log.Fatal("every server in the token is full: ask the backend for another")
	case errors.Is(err, netcode.ErrConnectTokenExpired):
		log.Fatal("the token expired before a server accepted it: ask for a fresh one")
	case err != nil:
		log.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("jump")); err != nil {
		log.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, netcode.MaxPayloadBytes)
	n, err := conn.Read(buf)
	switch {
	case errors.Is(err, io.EOF):
		log.Print("the server disconnected")
	case errors.Is(err, os.ErrDeadlineExceeded):
		log.Print("nothing within a second")
	case err == nil:
		log.Printf("server says %q", buf[:n])
	}
}

// fetchToken asks a token backend for a connect token, as the backend
// example (examples/backend) and "netcode client URL" do: a POST answered
// with the 2048 raw bytes.
func fetchToken(url string) ([]byte, error) {
	resp, err := http.Post(url, "", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("token backend: %s", resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, token.ConnectTokenBytes))
}

// NewListener serves netcode over a datagram socket made by the caller,
// here one from a net.ListenConfig (where socket options would be set); any
// net.PacketConn works, such as a transport.Mux for browser clients.
func ExampleNewListener() {
	const protocolID = 0x1122334455667788
	key, err := crypto.GenerateKey()
	if err != nil {
		log.Fatal(err)
	}
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(context.Background(), "udp4", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	l, err := netcode.NewListener(pc, &netcode.ServerConfig{ProtocolID: protocolID, PrivateKey: key, MaxClients: 8})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close() // closes pc too

	accepted := make(chan uint64, 1)
	go func() {
		c, err := l.AcceptConn(context.Background())
		if err != nil {
			return
		}
		accepted <- c.ClientID()
	}()
	tok, err := token.Generate(&token.Params{
		ProtocolID:     protocolID,
		ClientID:       7,
		PrivateKey:     key,
		ServerAddrs:    []netip.AddrPort{netip.MustParseAddrPort(pc.LocalAddr().String())},
		ExpireSeconds:  30,
		TimeoutSeconds: 5,
	})
	if err != nil {
		log.Fatal(err)
	}
	conn, err := netcode.Dial(tok)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	fmt.Println("server accepted client", <-accepted, "of", conn.MaxClients())
	// Output: server accepted client 7 of 8
}

// ExampleListener_ConnectLoopback seats a listen server's own player in a
// slot without packets: both ends are *Conns like any other.
func ExampleListener_ConnectLoopback() {
	key, err := crypto.GenerateKey()
	if err != nil {
		log.Fatal(err)
	}
	l, err := netcode.Listen("udp", "127.0.0.1:0", &netcode.ServerConfig{ProtocolID: 0x1122334455667788, PrivateKey: key, MaxClients: 4})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	var userData [token.UserDataBytes]byte
	copy(userData[:], "host player")
	srv, player, err := l.ConnectLoopback(1, userData)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := player.Write([]byte("ready")); err != nil {
		log.Fatal(err)
	}
	buf := make([]byte, netcode.MaxPayloadBytes)
	n, err := srv.Read(buf)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("slot %d of %d, client %d says %q\n", srv.ClientIndex(), srv.MaxClients(), srv.ClientID(), buf[:n])

	player.Close() // frees the slot; the server's end reads io.EOF
	_, err = srv.Read(buf)
	fmt.Println(err)
	// Output:
	// slot 0 of 4, client 1 says "ready"
	// EOF
}
