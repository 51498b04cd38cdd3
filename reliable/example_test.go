package reliable_test

import (
	"context"
	"io"
	"log"
	"net/http"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/reliable"
)

// Serve HTTP over netcode: every accepted connection becomes a Stream.
func ExampleListener() {
	l, err := netcode.Listen("udp", ":40000", &netcode.ServerConfig{
		ProtocolID: 0x1122334455667788,
		PrivateKey: privateKey,
	})
	if err != nil {
		log.Fatal(err)
	}
	streams, err := reliable.NewListener(l, nil)
	if err != nil {
		log.Fatal(err)
	}
	// Each Stream holds one of the server's MaxClients slots: the
	// timeouts cut a client that sends half a request header
	// (ReadHeaderTimeout) or keeps an idle connection (IdleTimeout), so
	// that a few slow or idle clients cannot hold every slot.
	srv := &http.Server{
		Handler:           http.FileServer(http.Dir("assets")),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       time.Minute,
	}
	log.Fatal(srv.Serve(streams))
}

// Fetch over netcode with net/http: the Dialer gets a connect token for
// each connection from the game's backend.
func ExampleDialer() {
	d := &reliable.Dialer{Token: func(ctx context.Context, network, address string) ([]byte, error) {
		return fetchConnectToken(ctx) // from your authenticated backend
	}}
	client := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	resp, err := client.Get("http://game/level-3.pak")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
}

// A game connection: unreliable state updates and reliable events over one
// netcode connection. Both ends use the same channels.
func ExampleSession() {
	conn, err := netcode.Dial(connectToken)
	if err != nil {
		log.Fatal(err)
	}
	s, err := reliable.NewSession(conn, &reliable.Config{Channels: []reliable.ChannelConfig{
		{Kind: reliable.Unreliable},      // 0: state, 60 times a second
		{Kind: reliable.ReliableOrdered}, // 1: events, chat, inventory
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	_ = s.Channel(0).Send(playerState())       // lost or late: the next one replaces it
	_ = s.Channel(1).Send([]byte("buy sword")) // exactly once, in order
	buf := make([]byte, reliable.DefaultMaxReliableMessage)
	n, err := s.Channel(1).Receive(buf)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("event: %q", buf[:n])
}

var (
	privateKey   crypto.Key
	connectToken []byte
)

func fetchConnectToken(context.Context) ([]byte, error) { return connectToken, nil }
func playerState() []byte                               { return []byte{1, 2, 3} }
