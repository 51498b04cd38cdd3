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
//
// With -transport udp it runs the same shape on raw UDP, no protocol: the
// floor of this shape in Go. Each client is a connected net.UDPConn with
// the same reader and writer goroutines and the same credit channel,
// sending datagrams of the size netcode's would be (pingpongOverhead
// more than the payload), and the server is one goroutine on one socket
// (ReadFromUDPAddrPort, WriteToUDPAddrPort). With -gomaxprocs 1 either
// transport runs on one thread of Go code, so the runtime wakes no idle
// thread to look for work when the reader readies the writer.

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode"
)

// apiechoArg is the hidden command that runs the public-API harness in a
// process of its own, so that its CPU time is its own.
const apiechoArg = "apiecho"

// apiTransports are the public-API harness's -transport values: netcode's
// dialed Conns and Listener, or raw UDP of the same shape.
var apiTransports = []string{"netcode", "udp"}

// apiClient is one client of the public-API harness.
type apiClient struct {
	conn    io.ReadWriteCloser // a *netcode.Conn, or a connected *net.UDPConn
	credits chan struct{}      // the reader hands the writer one per echo
	echoes  atomic.Uint64      // echoes in the measured window
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
	transport := fs.String("transport", "netcode", "netcode, or udp: the same goroutines on raw UDP (net.UDPConn, no protocol), the floor of this shape")
	procs := procsFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *clients < 1 || *clients > maxServerClients || *window < 1 || *size < 16 || *size > netcode.MaxPayloadBytes || *duration <= 0 || *warmup < 0 {
		return fmt.Errorf("%s: 1..%d -clients, a -window of 1 or more, a -size of 16..%d and a positive -duration",
			apiechoArg, maxServerClients, netcode.MaxPayloadBytes)
	}
	if !slices.Contains(apiTransports, *transport) {
		return fmt.Errorf("%s: -transport %q: want one of %v", apiechoArg, *transport, apiTransports)
	}
	restore, err := setProcs(*procs)
	if err != nil {
		return fmt.Errorf("%s: %w", apiechoArg, err)
	}
	defer restore()
	key, err := netcodeKey()
	if err != nil {
		return err
	}
	var addr string
	var stop func()
	if *transport == "udp" {
		addr, stop, err = serveUDPEcho(1)
	} else {
		addr, stop, err = serveDatagrams("netcode", key)
	}
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
	msgSize := *size
	if *transport == "udp" {
		msgSize += pingpongOverhead
	}
	for i := range cs {
		conn, err := dialAPI(ctx, *transport, key, addr, uint64(i+1))
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
			buf := make([]byte, msgSize)
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
			buf := make([]byte, udpBufBytes)
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

// dialAPI returns client id's connection to the harness's server at addr:
// a dialed netcode.Conn (a token minted with key), or for transport udp a
// net.UDPConn connected to it.
func dialAPI(ctx context.Context, transport string, key []byte, addr string, id uint64) (io.ReadWriteCloser, error) {
	if transport == "udp" {
		ua, err := net.ResolveUDPAddr("udp4", addr)
		if err != nil {
			return nil, err
		}
		return net.DialUDP("udp4", nil, ua)
	}
	tok, err := mint(key, addr, id)
	if err != nil {
		return nil, err
	}
	return netcode.DialContext(ctx, tok)
}
