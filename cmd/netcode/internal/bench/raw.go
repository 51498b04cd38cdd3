package bench

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode/internal/transport"
)

// runRaw runs the same load over raw UDP: an echo server on the batched
// socket the netcode Listener uses (internal/transport; Config.RawReaders
// goroutines, each reading a batch with recvmmsg and writing it back with
// sendmmsg, so that one can read while another writes), and clients on plain
// connected UDP sockets, with the same payload size, window or rate, and
// timing.
func runRaw(ctx context.Context, cfg *Config) (*Phase, error) {
	r := newRun(ctx, cfg, "raw-udp")
	p := &Phase{Name: "raw-udp", Clients: cfg.Clients}

	var (
		tc     transport.Conn
		err    error
		served atomic.Uint64 // datagrams received by the server
		srv    sync.WaitGroup
	)
	labelled(ctx, SideServer, func(context.Context) {
		tc, err = transport.Listen("udp4", "127.0.0.1:0")
		if err != nil {
			return
		}
		for range cfg.RawReaders {
			srv.Add(1)
			go func() {
				defer srv.Done()
				rawEcho(tc, &served)
			}()
		}
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		tc.Close()
		srv.Wait()
	}()
	saddr, err := net.ResolveUDPAddr("udp4", tc.LocalAddr().String())
	if err != nil {
		return nil, err
	}

	r.clients = make([]*client, cfg.Clients)
	for i := range r.clients {
		c := new(client)
		uc, err := net.DialUDP("udp4", nil, saddr)
		if err != nil {
			for _, c := range r.clients[:i] {
				c.ep.Close()
			}
			return nil, err
		}
		c.ep = uc
		r.clients[i] = c
	}
	p.Connected = cfg.Clients
	labelled(ctx, SideClient, func(context.Context) {
		for _, c := range r.clients {
			r.readers.Add(1)
			go r.reader(c)
		}
		r.startTraffic()
	})
	status := func() string { return "" }
	err = r.measure(p, func() uint64 { return 2 * served.Load() }, nil, nil, nil, status)
	r.stop(p)
	return p, err
}

// rawEcho sends every datagram back to its sender, a batch at a time.
func rawEcho(tc transport.Conn, served *atomic.Uint64) {
	msgs := make([]transport.Message, 64)
	for i := range msgs {
		msgs[i].Buf = make([]byte, transport.MaxDatagram)
	}
	for {
		for i := range msgs {
			msgs[i].Buf = msgs[i].Buf[:cap(msgs[i].Buf)]
		}
		n, err := tc.ReadBatch(msgs)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(time.Millisecond) // do not spin on a persistent error
			continue
		}
		served.Add(uint64(n))
		out := msgs[:n]
		for len(out) > 0 {
			k, err := tc.WriteBatch(out)
			if err != nil || k <= 0 {
				k++ // skip the datagram that failed
			}
			out = out[min(k, len(out)):]
		}
	}
}
