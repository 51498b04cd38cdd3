package token_test

import (
	"fmt"
	"log"
	"net/netip"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/token"
)

// A token backend mints one connect token per client and per connection,
// after it has authenticated the player: the token names the servers to
// try, in order, and what the server learns about the client (its id and
// user data). The client only reads the public part (Parse); the private
// part is sealed with the key the servers share.
func ExampleGenerate() {
	key, err := crypto.GenerateKey() // in production: the servers' key, from "netcode keygen"
	if err != nil {
		log.Fatal(err)
	}
	var userData [token.UserDataBytes]byte
	copy(userData[:], "team=blue")
	tok, err := token.Generate(&token.Params{
		ProtocolID: 0x1122334455667788,
		ClientID:   1001, // the player's account id, say
		PrivateKey: key,
		ServerAddrs: []netip.AddrPort{
			netip.MustParseAddrPort("203.0.113.7:40000"),
			netip.MustParseAddrPort("[2001:db8::7]:40000"), // tried if the first is full or silent
		},
		ExpireSeconds:  30, // the client must connect within 30 s
		TimeoutSeconds: 5,  // either side gives up after 5 s without a packet
		UserData:       userData,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(tok), "bytes")

	pub, err := token.Parse(tok) // what the client can read
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("protocol %#x, valid for %d s, timeout %d s\n",
		pub.ProtocolID, pub.ExpireTimestamp-pub.CreateTimestamp, pub.TimeoutSeconds)
	fmt.Println("servers:", pub.ServerAddrs)
	// Output:
	// 2048 bytes
	// protocol 0x1122334455667788, valid for 30 s, timeout 5 s
	// servers: [203.0.113.7:40000 [2001:db8::7]:40000]
}
