package netcode_test

import (
	"fmt"
	"log"
	"net/netip"

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
	tok, err := token.Generate(token.Params{
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
