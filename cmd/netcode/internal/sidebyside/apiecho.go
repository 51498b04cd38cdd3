package main

// The public-API harness of cref -api: netcode driven as a newcomer would
// drive it from its documentation, in one process, against cbench. The
// server is serveDatagrams' netcode.Listen echo server (a goroutine per
// connection, Read then Write); each client is a dialed netcode.Conn with
// a reader goroutine, which records each echo's round trip and hands a
// credit to the client's writer goroutine, which Writes the next payload:
// the usual game loop's shape, a receive loop and a send loop, where
// `netcode bench` writes the next payload from the reader itself and so
// pays no hand-off between goroutines.

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode"
)

// apiechoArg is the hidden command that runs the public-API harness in a
// process of its own, so that its CPU time is its own.
const apiechoArg = "apiecho"

// apiClient is one client of the public-API harness.
type apiClient struct {
	conn    *netcode.Conn
	credits chan struct{} // the reader hands the writer one per echo
	echoes  atomic.Uint64 // echoes in the measured window
	rtts    []time.Duration
}

// runAPIEcho runs the public-API harness: -clients clients, each keeping
// -window payloads of -size bytes in flight, a -warmup, then a
// -duration window, and prints one result line in cbench's format
// (parseCbench). With -cpuprofile it writes the window's CPU profile.
func runAPIEcho(args []string, stdout, stderr io.Writer) error {
	fs := newFlags(apiechoArg, stderr)
	clients := fs.Int("clients", 1, "clients")
	window := fs.Int("window", 8, "payloads in flight per client")
	size := fs.Int("size", 100, "payload bytes (16 or more: a sequence number and a send time)")
	duration := fs.Duration("duration", 3*time.Second, "measured window, after the warm-up")
	warmup := fs.Duration("warmup", time.Second, "unmeasured exchange before the window")
	cpuprofile := fs.String("cpuprofile", "", "write the measured window's CPU profile to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *clients < 1 || *clients > maxServerClients || *window < 1 || *size < 16 || *size > netcode.MaxPayloadBytes || *duration <= 0 || *warmup < 0 {
		return fmt.Errorf("%s: 1..%d -clients, a -window of 1 or more, a -size of 16..%d and a positive -duration",
			apiechoArg, maxServerClients, netcode.MaxPayloadBytes)
	}
	key, err := netcodeKey()
	if err != nil {
		return err
	}
	addr, stop, err := serveDatagrams("netcode", key)
	if err != nil {
		return err
	}
	defer stop()

	cs := make([]*apiClient, *clients)
	defer func() {
		for _, c := range cs {
			if c != nil && c.conn != nil {
				c.conn.Close()
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	for i := range cs {
		tok, err := mint(key, addr, uint64(i+1))
		if err != nil {
			return err
		}
		conn, err := netcode.DialContext(ctx, tok)
		if err != nil {
			return fmt.Errorf("%s: client %d: %w", apiechoArg, i+1, err)
		}
		cs[i] = &apiClient{conn: conn, credits: make(chan struct{}, *window)}
	}

	epoch := time.Now()
	var measuring, stopping atomic.Bool
	var wg sync.WaitGroup
	for _, c := range cs {
		for range *window {
			c.credits <- struct{}{}
		}
		c.rtts = make([]time.Duration, 0, 1<<16)
		wg.Go(func() { // the writer
			buf := make([]byte, *size)
			var seq uint64
			for range c.credits {
				seq++
				binary.LittleEndian.PutUint64(buf[0:8], seq)
				binary.LittleEndian.PutUint64(buf[8:16], uint64(time.Since(epoch)))
				if _, err := c.conn.Write(buf); err != nil {
					return
				}
			}
		})
		wg.Go(func() { // the reader
			defer close(c.credits)
			buf := make([]byte, netcode.MaxPayloadBytes)
			for {
				n, err := c.conn.Read(buf)
				if err != nil {
					return
				}
				if n < 16 || stopping.Load() {
					continue
				}
				if measuring.Load() {
					c.rtts = append(c.rtts, time.Since(epoch)-time.Duration(binary.LittleEndian.Uint64(buf[8:16])))
					c.echoes.Add(1)
				}
				c.credits <- struct{}{}
			}
		})
	}

	cpu, wall, err := echoWindow(*warmup, *duration, *cpuprofile, &measuring)
	if err != nil {
		return err
	}
	stopping.Store(true)
	for _, c := range cs {
		c.conn.Close()
	}
	wg.Wait()

	var echoes uint64
	var rtts []time.Duration
	for _, c := range cs {
		echoes += c.echoes.Load()
		rtts = append(rtts, c.rtts...)
	}
	return printEchoResult(stdout, apiechoArg, *clients, *window, *size, echoes, cpu, wall, rtts)
}
