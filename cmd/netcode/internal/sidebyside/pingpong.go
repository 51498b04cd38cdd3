package main

// The floor of a Go echo at one client and window 1, for cref -floor: a
// bare UDP ping-pong on loopback, one server goroutine and one client
// goroutine on net.UDPConn in one process, no protocol at all. It is what
// Go's runtime poller costs an echo (each side's read that finds the
// socket empty, the scheduler's epoll_pwait, the wake-ups), which no
// library built on the poller pays less than.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"
)

// pingpongArg is the hidden command that runs the ping-pong in a process
// of its own, so that its CPU time is its own.
const pingpongArg = "pingpong"

// pingpongOverhead is what netcode adds to a payload on the wire (prefix
// byte, sequence number up to 8 bytes, AEAD tag): the ping-pong sends
// datagrams of the size a netcode payload of -size makes.
const pingpongOverhead = 1 + 8 + 16

// runPingpong measures the ping-pong for -duration after a -warmup and
// prints one result line in cbench's format (parseCbench).
func runPingpong(args []string, stdout, stderr io.Writer) error {
	fs := newFlags(pingpongArg, stderr)
	size := fs.Int("size", 100, "payload bytes (the datagram carries what netcode would add)")
	duration := fs.Duration("duration", 3*time.Second, "measured window")
	warmup := fs.Duration("warmup", time.Second, "unmeasured exchange before the window")
	procs := procsFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *size < 1 || *duration <= 0 || *warmup < 0 {
		return errors.New("pingpong: a positive -size and -duration")
	}
	restore, err := setProcs(*procs)
	if err != nil {
		return fmt.Errorf("pingpong: %w", err)
	}
	defer restore()
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	defer srv.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, from, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			if _, err := srv.WriteToUDPAddrPort(buf[:n], from); err != nil {
				return
			}
		}
	}()
	cli, err := net.DialUDP("udp4", nil, srv.LocalAddr().(*net.UDPAddr))
	if err != nil {
		return err
	}
	defer cli.Close()
	msg, buf := make([]byte, *size+pingpongOverhead), make([]byte, 1500)
	var rtts []time.Duration
	exchange := func(d time.Duration, record bool) (int, error) {
		n := 0
		for start := time.Now(); time.Since(start) < d; n++ {
			sent := time.Now()
			if _, err := cli.Write(msg); err != nil {
				return n, err
			}
			if _, err := cli.Read(buf); err != nil {
				return n, err
			}
			if record {
				rtts = append(rtts, time.Since(sent))
			}
		}
		return n, nil
	}
	if _, err := exchange(*warmup, false); err != nil {
		return err
	}
	rtts = make([]time.Duration, 0, 1<<20)
	cpu0 := cpuTime()
	n, err := exchange(*duration, true)
	cpu := cpuTime() - cpu0
	if err != nil {
		return err
	}
	cli.Close()
	srv.Close()
	<-done
	slices.Sort(rtts)
	q := func(f float64) int64 { return rtts[int(f*float64(len(rtts)-1))].Microseconds() }
	fmt.Fprintf(stdout, "result clients=1 window=1 size=%d echoes_per_cpu_second=%.0f cpu_seconds=%.3f p50_us=%d p99_us=%d\n",
		*size, float64(n)/cpu.Seconds(), cpu.Seconds(), q(0.5), q(0.99))
	return nil
}
