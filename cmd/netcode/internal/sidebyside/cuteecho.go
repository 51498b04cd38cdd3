package main

// The Go side of `sidebyside cute` at Cute Framework's client/server layer:
// package cute's default Conns (messages, fire-and-forget or reliable and
// in order), driven as `netcode bench -dialect cute` drives the bare
// protocol layer, which its bench cannot drive (its Cute phase is the bare
// protocol layer only): in one process, a cute.Listen echo server with a
// goroutine per connection (ReadMessage, then Send of the same kind), and
// clients dialed with a zero cute.Dialer, each with a reader goroutine
// that records each echo's round trip and Sends the next payload.

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode/cute"
)

// cuteechoArg is the hidden command that runs the Go client/server-layer
// harness in a process of its own, so that its CPU time is its own.
const cuteechoArg = "cuteecho"

// cuteModes are the modes of `sidebyside cute`: the bare protocol layer
// (PAYLOAD packets; Go: netcode bench -dialect cute) and the client/server
// layer's two kinds of message.
var cuteModes = []string{"proto", "unreliable", "reliable"}

// runCuteEcho runs the Go client/server-layer harness in mode unreliable
// or reliable (or proto: the same harness on bare protocol Conns) and
// prints one result line in cbench's format (parseCbench).
func runCuteEcho(args []string, stdout, stderr io.Writer) error {
	fs := newFlags(cuteechoArg, stderr)
	mode := fs.String("mode", "reliable", "proto (bare protocol Conns), unreliable or reliable messages")
	clients := fs.Int("clients", 1, "clients")
	window := fs.Int("window", 8, "payloads in flight per client")
	size := fs.Int("size", 100, "payload bytes (16 or more: a sequence number and a send time)")
	warmup := fs.Duration("warmup", time.Second, "unmeasured exchange before the window")
	duration := fs.Duration("duration", 3*time.Second, "measured window")
	cpuprofile := fs.String("cpuprofile", "", "write the measured window's CPU profile to this file")
	procs := procsFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !slices.Contains(cuteModes, *mode) {
		return fmt.Errorf("%s: -mode %q is not one of %v", cuteechoArg, *mode, cuteModes)
	}
	restore, err := setProcs(*procs)
	if err != nil {
		return fmt.Errorf("%s: %w", cuteechoArg, err)
	}
	defer restore()
	if *clients < 1 || *clients > cute.MaxMaxClients || *window < 1 || *size < 16 || *size > cute.MaxPayloadBytes || *duration <= 0 || *warmup < 0 {
		return fmt.Errorf("%s: 1..%d -clients, a -window of 1 or more, a -size of 16..%d and a positive -duration",
			cuteechoArg, cute.MaxMaxClients, cute.MaxPayloadBytes)
	}
	bare, reliable := *mode == "proto", *mode == "reliable"
	pk, sk := cute.GenerateKeyPair()
	l, err := cute.Listen("udp4", "127.0.0.1:0", &cute.ServerConfig{ApplicationID: protocolID, PublicKey: pk, SecretKey: sk,
		MaxClients: *clients, BareProtocol: bare})
	if err != nil {
		return err
	}
	var srv sync.WaitGroup
	defer srv.Wait()
	defer l.Close()
	srv.Go(func() {
		for {
			c, err := l.AcceptConn(context.Background())
			if err != nil {
				return
			}
			srv.Go(func() {
				defer c.Close()
				buf := make([]byte, cute.MaxPayloadBytes)
				for {
					n, _, err := c.ReadMessage(buf)
					if err != nil {
						return
					}
					if _, err := c.Send(buf[:n], reliable); err != nil {
						return
					}
				}
			})
		}
	})

	addr := netip.MustParseAddrPort(l.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	d := &cute.Dialer{BareProtocol: bare}
	conns := make([]*cute.Conn, *clients)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range conns {
		tok, err := cute.GenerateToken(&cute.TokenParams{ApplicationID: protocolID, ClientID: uint64(i + 1), SecretKey: sk,
			ServerAddrs: []netip.AddrPort{addr}, ExpireSeconds: 3600})
		if err != nil {
			return err
		}
		if conns[i], err = d.DialContext(ctx, tok); err != nil {
			return fmt.Errorf("%s: client %d: %w", cuteechoArg, i+1, err)
		}
	}

	epoch := time.Now()
	var measuring, stopping atomic.Bool
	var echoes atomic.Uint64
	rtts := make([][]time.Duration, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wbuf := make([]byte, *size)
		var seq uint64
		send := func() error {
			seq++
			binary.LittleEndian.PutUint64(wbuf[0:8], seq)
			binary.LittleEndian.PutUint64(wbuf[8:16], uint64(time.Since(epoch)))
			_, err := c.Send(wbuf, reliable)
			return err
		}
		for range *window {
			if err := send(); err != nil {
				return err
			}
		}
		rtts[i] = make([]time.Duration, 0, 1<<16)
		wg.Go(func() {
			rbuf := make([]byte, cute.MaxPayloadBytes)
			for {
				n, _, err := c.ReadMessage(rbuf)
				if err != nil {
					return
				}
				if n < 16 || stopping.Load() {
					continue
				}
				if measuring.Load() {
					rtts[i] = append(rtts[i], time.Since(epoch)-time.Duration(binary.LittleEndian.Uint64(rbuf[8:16])))
					echoes.Add(1)
				}
				if send() != nil {
					return
				}
			}
		})
	}

	cpu, wall, err := echoWindow(*warmup, *duration, *cpuprofile, &measuring)
	if err != nil {
		return err
	}
	stopping.Store(true)
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()

	return printEchoResult(stdout, cuteechoArg, *clients, *window, *size, echoes.Load(), cpu, wall, slices.Concat(rtts...))
}
