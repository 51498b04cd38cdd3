package cute_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/gonetcode/netcode/cute"
)

// A token service: one signing key pair for the deployment (load it from
// your secret store; the servers hold the same pair), one token per player.
func ExampleGenerateToken() {
	_, secretKey := cute.GenerateKeyPair()
	token, err := cute.GenerateToken(&cute.TokenParams{
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

// A Go server for a Cute Framework game: an echo server. Each Conn speaks
// what cf_client_send and cf_client_pop_packet speak: one Read is one
// message of any size, reliable or fire-and-forget (ReadMessage says
// which), and Send answers in kind (send_reliably); Write is a reliable
// Send.
func ExampleListen() {
	var secretKey cute.SecretKey // the deployment's, from your secret store
	l, err := cute.Listen("udp", "203.0.113.5:5000", &cute.ServerConfig{
		ApplicationID: 0x1234,
		PublicKey:     secretKey.Public(),
		SecretKey:     secretKey,
	})
	if err != nil {
		return // a zero key is refused: mint one with GenerateKeyPair
	}
	defer l.Close()
	for {
		c, err := l.AcceptConn(context.Background())
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			buf := make([]byte, cute.DefaultMaxMessageBytes)
			for {
				n, reliable, err := c.ReadMessage(buf) // io.EOF when the client disconnects
				if err != nil {
					return
				}
				c.Send(buf[:n], reliable)
			}
		}()
	}
}

// A Cute client: the token comes from the token service; the errors say
// why a connection failed.
func ExampleDial() {
	var token []byte // 1114 bytes from the token service
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := cute.DialContext(ctx, token)
	switch {
	case errors.Is(err, cute.ErrConnectionDenied):
		fmt.Println("every server is full")
		return
	case errors.Is(err, cute.ErrInvalidConnectToken):
		fmt.Println("not a Cute token")
		return
	case err != nil:
		fmt.Println(err)
		return
	}
	defer c.Close()
	c.Write([]byte("hello"))
	// Output: not a Cute token
}
