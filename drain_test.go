package netcode_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/token"
)

// TestDrain: after Drain a new dial is denied, a connected client keeps
// exchanging payloads, and a token that lists another server after the
// draining one connects to that one.
func TestDrain(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := listen(t, f.network, f.addr, nil)
			cli, srv := pair(t, l, withClientID(1))

			l.Drain()
			l.Drain() // idempotent

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := netcode.DialContext(ctx, mint(t, l.Addr(), withClientID(2)))
			require.ErrorIs(t, err, netcode.ErrConnectionDenied)
			assert.Positive(t, l.Stats().DeniedSent)
			assert.Equal(t, 1, l.Stats().Connected)

			// The existing session works both ways.
			for _, msg := range []string{"still", "here"} {
				_, err = cli.Write([]byte(msg))
				require.NoError(t, err)
				got, err := readWithin(t, srv, 5*time.Second)
				require.NoError(t, err)
				require.Equal(t, msg, string(got))
				_, err = srv.Write(got)
				require.NoError(t, err)
				got, err = readWithin(t, cli, 5*time.Second)
				require.NoError(t, err)
				require.Equal(t, msg, string(got))
			}

			// A fleet token: the draining server first, a live one second.
			other := listen(t, f.network, f.addr, nil)
			tok := mint(t, nil, withClientID(3), func(p *token.Params) {
				p.ServerAddrs = []netip.AddrPort{
					netip.MustParseAddrPort(l.Addr().String()),
					netip.MustParseAddrPort(other.Addr().String()),
				}
			})
			c3, err := netcode.DialContext(ctx, tok)
			require.NoError(t, err)
			defer c3.Close()
			assert.Equal(t, other.Addr().String(), c3.RemoteAddr().String())
			s3, err := other.AcceptConn(ctx)
			require.NoError(t, err)
			defer s3.Close()
			assert.Equal(t, uint64(3), s3.ClientID())
			assert.Equal(t, 1, l.Stats().Connected)
		})
	}
}

// A graceful shutdown: stop taking clients, give the connected ones time
// to finish, then close.
func ExampleListener_Drain() {
	key, _ := crypto.GenerateKey()
	cfg := &netcode.ServerConfig{ProtocolID: 0x1234, PrivateKey: key}
	l, err := netcode.Listen("udp", "127.0.0.1:0", cfg)
	if err != nil {
		log.Fatal(err)
	}
	mint := func(id uint64) []byte {
		tok, err := token.Generate(&token.Params{ProtocolID: 0x1234, ClientID: id, PrivateKey: key,
			ServerAddrs: []netip.AddrPort{netip.MustParseAddrPort(l.Addr().String())}, ExpireSeconds: 30, TimeoutSeconds: 5})
		if err != nil {
			log.Fatal(err)
		}
		return tok
	}
	player, err := netcode.Dial(mint(1))
	if err != nil {
		log.Fatal(err)
	}
	defer player.Close()

	// SIGTERM arrived: no new clients from now on.
	l.Drain()
	_, err = netcode.Dial(mint(2))
	fmt.Println("a new client is denied:", errors.Is(err, netcode.ErrConnectionDenied))
	fmt.Println("still connected:", l.Stats().Connected)

	// Wait for the connected clients to leave, up to a deadline.
	player.Close()
	deadline := time.Now().Add(25 * time.Second)
	for l.Stats().Connected > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Println("left:", l.Stats().Connected == 0)
	l.Close()
	// Output:
	// a new client is denied: true
	// still connected: 1
	// left: true
}
