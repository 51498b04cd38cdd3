// Command echo runs a netcode server and several clients on loopback: each
// client connects with its own connect token, sends payloads, and prints the
// echoes the server sends back.
//
//	go run ./examples/echo
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/netip"
	"sync"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/token"
)

const protocolID = 0x6e6574636f646531 // "netcode1"

// errMismatch: an echo differed from the payload sent.
var errMismatch = errors.New("echo differs from the payload sent")

func main() {
	clients := flag.Int("clients", 4, "number of clients")
	messages := flag.Int("messages", 3, "payloads each client sends")
	addr := flag.String("addr", "127.0.0.1:0", "server address")
	flag.Parse()
	if err := run(*addr, *clients, *messages); err != nil {
		log.Fatal(err)
	}
}

func run(addr string, clients, messages int) error {
	// The private key is shared by the servers and the token backend only.
	key, err := crypto.GenerateKey()
	if err != nil {
		return err
	}
	l, err := netcode.Listen("udp", addr, &netcode.ServerConfig{
		ProtocolID: protocolID,
		PrivateKey: key,
		MaxClients: 64,
	})
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Printf("server: listening on %s\n", l.Addr())

	var serving sync.WaitGroup
	serving.Add(1)
	go func() {
		defer serving.Done()
		serve(l)
	}()

	server := netip.MustParseAddrPort(l.Addr().String())
	err = runClients(key, server, clients, messages)
	l.Close()
	serving.Wait()
	st := l.Stats()
	fmt.Printf("server: %d connections opened, %d challenges sent, %d packets ignored (mostly the redundant copies of each disconnect packet)\n",
		st.ConnectionsOpened, st.ChallengesSent, st.Ignored)
	return err
}

// runClients runs the clients at once against server and returns the
// errors of those that failed, joined (nil if all got their echoes).
func runClients(key crypto.Key, server netip.AddrPort, clients, messages int) error {
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			id := uint64(1000 + i)
			if err := client(key, server, id, messages); err != nil {
				errs[i] = fmt.Errorf("client %d: %w", id, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// serve echoes every payload back to the client that sent it.
func serve(l *netcode.Listener) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.AcceptConn(context.Background())
		if err != nil {
			return
		}
		fmt.Printf("server: client %d connected from %s in slot %d\n", c.ClientID(), c.RemoteAddr(), c.ClientIndex())
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			buf := make([]byte, netcode.MaxPayloadBytes)
			for {
				n, err := c.Read(buf)
				if err != nil {
					fmt.Printf("server: client %d left: %v\n", c.ClientID(), err)
					return
				}
				if _, err := c.Write(buf[:n]); err != nil {
					return
				}
			}
		}()
	}
}

func client(key crypto.Key, server netip.AddrPort, id uint64, messages int) error {
	// In a real game the token comes from an HTTPS backend after login.
	tok, err := token.Generate(token.Params{
		ProtocolID:     protocolID,
		ClientID:       id,
		PrivateKey:     key,
		ServerAddrs:    []netip.AddrPort{server},
		ExpireSeconds:  30,
		TimeoutSeconds: 5,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := netcode.DialContext(ctx, tok)
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, netcode.MaxPayloadBytes)
	for i := range messages {
		msg := fmt.Sprintf("message %d from client %d", i, id)
		start := time.Now()
		if _, err := c.Write([]byte(msg)); err != nil {
			return err
		}
		if err := c.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
			return err
		}
		n, err := c.Read(buf)
		if err != nil {
			return err
		}
		if got := string(buf[:n]); got != msg {
			return fmt.Errorf("%w: sent %q, got %q", errMismatch, msg, got)
		}
		fmt.Printf("client %d: echo %q in %v\n", id, buf[:n], time.Since(start).Round(time.Microsecond))
	}
	return nil
}
