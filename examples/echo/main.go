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
	"io"
	"log"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/token"
)

const protocolID = 0x6e6574636f646531 // "netcode1"

// errMismatch: an echo differed from the payload sent.
var errMismatch = errors.New("echo differs from the payload sent")

// errTooManyClients: -clients is over -max-clients.
var errTooManyClients = errors.New("more clients than server slots")

func main() {
	clients := flag.Int("clients", 4, "number of clients (at most -max-clients)")
	maxClients := flag.Int("max-clients", 64, "the server's client slots")
	messages := flag.Int("messages", 3, "payloads each client sends")
	addr := flag.String("addr", "127.0.0.1:0", "server address")
	flag.Parse()
	if err := run(os.Stdout, *addr, *clients, *maxClients, *messages); err != nil {
		log.Fatal(err)
	}
}

// run runs the server and the clients, and ends once every client has
// disconnected and the server has read each disconnect (io.EOF): only then
// does it close the server.
func run(out io.Writer, addr string, clients, maxClients, messages int) error {
	switch {
	case clients < 1 || messages < 0:
		return fmt.Errorf("-clients %d -messages %d: need at least one client and no negative count", clients, messages)
	case clients > maxClients:
		return fmt.Errorf("%w: -clients %d but -max-clients %d; raise -max-clients (up to 65536)", errTooManyClients, clients, maxClients)
	}
	// The private key is shared by the servers and the token backend only.
	key, err := crypto.GenerateKey()
	if err != nil {
		return err
	}
	l, err := netcode.Listen("udp", addr, &netcode.ServerConfig{
		ProtocolID: protocolID,
		PrivateKey: key,
		MaxClients: maxClients,
	})
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Fprintf(out, "server: listening on %s\n", l.Addr())

	// Every connection the server accepts reports how it ended here; at
	// most one per client.
	ends := make(chan error, clients)
	var serving sync.WaitGroup
	serving.Add(1)
	go func() {
		defer serving.Done()
		serve(out, l, ends)
	}()

	server := netip.MustParseAddrPort(l.Addr().String())
	connected, err := runClients(out, key, server, clients, messages)
	// Each client that connected has closed, sending its disconnect: wait
	// until the server has read every one of them (or timed the client out,
	// if all the disconnect packets were lost) before closing it.
	var eof, timedOut, other int
	for range connected {
		switch e := <-ends; {
		case errors.Is(e, io.EOF):
			eof++
		case errors.Is(e, netcode.ErrConnectionTimedOut):
			timedOut++
		default:
			other++
		}
	}
	l.Close()
	serving.Wait()
	st := l.Stats()
	fmt.Fprintf(out, "server: %d connections opened, %d challenges sent; %d clients disconnected (io.EOF), %d timed out, %d other\n",
		st.ConnectionsOpened, st.ChallengesSent, eof, timedOut, other)
	fmt.Fprintf(out, "server: %d packets ignored: a client sends its disconnect packet several times, and the server ignores the copies after the first that arrive before it closes\n",
		st.Ignored)
	if err == nil && (timedOut > 0 || other > 0) {
		err = fmt.Errorf("%d of %d connections did not end with the client's disconnect", timedOut+other, connected)
	}
	return err
}

// runClients runs the clients at once against server and returns how many
// connected, and the errors of those that failed, joined (nil if all got
// their echoes).
func runClients(out io.Writer, key crypto.Key, server netip.AddrPort, clients, messages int) (int, error) {
	errs := make([]error, clients)
	var connected atomic.Int64
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			id := uint64(1000 + i)
			if err := client(out, key, server, id, messages, &connected); err != nil {
				errs[i] = fmt.Errorf("client %d: %w", id, err)
			}
		})
	}
	wg.Wait()
	return int(connected.Load()), errors.Join(errs...)
}

// serve echoes every payload back to the client that sent it, and sends
// how each connection ended to ends.
func serve(out io.Writer, l *netcode.Listener, ends chan<- error) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.AcceptConn(context.Background())
		if err != nil {
			return
		}
		fmt.Fprintf(out, "server: client %d connected from %s in slot %d\n", c.ClientID(), c.RemoteAddr(), c.ClientIndex())
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			buf := make([]byte, netcode.MaxPayloadBytes)
			for {
				n, err := c.Read(buf)
				if err != nil {
					fmt.Fprintf(out, "server: client %d left: %v\n", c.ClientID(), err)
					ends <- err
					return
				}
				if _, err := c.Write(buf[:n]); err != nil {
					return
				}
			}
		}()
	}
}

// client connects with a fresh token, counts itself in connected, and
// checks the echoes of its payloads.
func client(out io.Writer, key crypto.Key, server netip.AddrPort, id uint64, messages int, connected *atomic.Int64) error {
	// In a real game the token comes from an HTTPS backend after login.
	tok, err := token.Generate(&token.Params{
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
	connected.Add(1)
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
		fmt.Fprintf(out, "client %d: echo %q in %v\n", id, buf[:n], time.Since(start).Round(time.Microsecond))
	}
	return nil
}
