package cute_test

import (
	"fmt"
	"net/netip"

	"github.com/gonetcode/netcode/cute"
)

// A token service: one signing key pair for the deployment (load it from
// your secret store; the servers hold the same pair), one token per player.
func ExampleGenerateToken() {
	_, secretKey := cute.GenerateKeyPair()
	token, err := cute.GenerateToken(cute.TokenParams{
		ApplicationID: 0x1234,
		ClientID:      7,
		SecretKey:     secretKey,
		ServerAddrs:   []netip.AddrPort{netip.MustParseAddrPort("203.0.113.5:5000")},
		ExpireSeconds: 60,
	})
	if err != nil {
		panic(err)
	}
	// Hand the 1114 bytes to the client (over HTTPS).
	t, _ := cute.ParseToken(token)
	fmt.Println(len(token), t.ServerAddrs[0], t.Expires.Sub(t.Created))
	// Output: 1114 203.0.113.5:5000 1m0s
}
