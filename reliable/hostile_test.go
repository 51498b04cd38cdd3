package reliable

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/internal/testing/netsim"
	"github.com/gonetcode/netcode/token"
)

// What an authenticated but hostile peer can make a connection hold, with
// the default configuration: the bounds docs/security.md states. A reliable
// channel's receive window is 256 KiB (226 chunks of 1168 bytes, each in a
// 1280-byte buffer once allocated, and a ring slot); an unreliable
// channel's receive queue holds 64 KiB of messages.
const (
	maxPinnedReliable   = 300 << 10
	maxPinnedUnreliable = defaultQueueBytes
)

// pinnedRecv returns the bytes a core's receive state holds for channel
// ch: the ring and the buffers of a reliable channel, the buffers of an
// unreliable channel's receive queue.
func pinnedRecv(c *core, ch int) int {
	cs := &c.chans[ch]
	if cs.spec.kind == Unreliable {
		n := 0
		for _, b := range cs.urcv.bufs {
			n += cap(b)
		}
		return n
	}
	r := &cs.rcv
	n := len(r.slots) * int(unsafe.Sizeof(recvSlot{}))
	for _, s := range r.slots {
		n += cap(s.data)
	}
	return n
}

func chunkEntry(ch uint8, seq uint32, data []byte) []byte {
	p := []byte{entryChunk, ch, 0}
	p = binary.LittleEndian.AppendUint32(p, seq)
	p = binary.LittleEndian.AppendUint16(p, uint16(len(data)))
	return append(p, data...)
}

func messageEntry(ch uint8, data []byte) []byte {
	p := []byte{entryMessage, ch}
	p = binary.LittleEndian.AppendUint16(p, uint16(len(data)))
	return append(p, data...)
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestWithheldChunkBound is a peer that withholds chunk 0 of a reliable
// channel and sends every later chunk its window takes, full, and floods
// the unreliable channel with its largest messages, which the application
// does not read: what the connection holds stays within the documented
// bounds (on 40ddb1a: 4096 chunks, about 5.4 MB, and 256 messages of up to
// 18 KB, about 4.8 MB). Once chunk 0 comes and the application has read
// everything, the buffers go back within two trims.
func TestWithheldChunkBound(t *testing.T) {
	r, err := (&Config{}).resolve(false) // 0 reliable-ordered, 1 unreliable
	require.NoError(t, err)
	now := time.Unix(1000, 0)
	before := heapInUse()
	c, err := newCore(r, now, func([]byte) {})
	require.NoError(t, err)
	layout := binary.LittleEndian.AppendUint32(nil, r.layout)
	data := make([]byte, r.chunkMax)
	pkt := uint16(0)
	chunks := 0
	for seq := uint32(1); ; seq++ {
		require.Less(t, seq, uint32(1<<16), "the window never ends")
		pkt++
		if !c.process(pkt, append(append([]byte(nil), layout...), chunkEntry(0, seq, data)...)) {
			break // beyond the window: refused
		}
		chunks++
	}
	msg := make([]byte, r.chans[1].maxMessage)
	for range 2 * defaultQueue {
		pkt++
		c.process(pkt, append(append([]byte(nil), layout...), messageEntry(1, msg)...))
	}
	require.NoError(t, c.err)
	rel, unrel := pinnedRecv(c, 0), pinnedRecv(c, 1)
	heap := int(heapInUse() - before)
	t.Logf("withheld chunk 0: %d chunks buffered, %d bytes pinned; unreliable queue: %d messages, %d bytes pinned; heap of the core %d bytes",
		chunks, rel, c.chans[1].urcv.size, unrel, heap)
	assert.LessOrEqual(t, rel, maxPinnedReliable, "reliable receive state")
	assert.LessOrEqual(t, unrel, maxPinnedUnreliable, "unreliable receive queue")
	assert.Positive(t, c.stats.UnreliableDropped, "the flood past the queue is dropped")

	// Chunk 0 comes; the application reads every message.
	pkt++
	require.True(t, c.process(pkt, append(append([]byte(nil), layout...), chunkEntry(0, 0, data)...)))
	buf := make([]byte, r.chunkMax)
	for c.chans[0].rcv.read(buf, true) > 0 {
	}
	for c.chans[1].urcv.size > 0 {
		c.chans[1].urcv.pop()
	}
	for range 2 {
		now = now.Add(time.Second)
		c.tick(now)
	}
	assert.Equal(t, initialSlots*int(unsafe.Sizeof(recvSlot{})), pinnedRecv(c, 0), "reliable buffers not freed")
	assert.Zero(t, pinnedRecv(c, 1), "unreliable buffers not freed")
	runtime.KeepAlive(c)
}

// TestAckTimeout is a peer that receives everything and acknowledges
// nothing: the sender gives up with ErrAckTimeout once its oldest chunk
// has waited for the ack timeout and been resent enough, not before (on
// 40ddb1a it resent for ever). A peer that acks late, but within the
// timeout, is not given up on.
func TestAckTimeout(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		want    time.Duration // when the connection ends; 0: never
	}{
		{"default", 0, defaultAckTimeout},
		{"set", 5 * time.Second, 5 * time.Second},
		// The resends come first: the fifth is 3.4 s after the first send
		// (200 ms, doubling, at most 1 s).
		{"shorter than the resends", time.Second, 3400 * time.Millisecond},
		{"never", -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := (&Config{AckTimeout: tt.timeout}).resolve(false)
			require.NoError(t, err)
			start := time.Unix(1000, 0)
			sent := 0
			c, err := newCore(r, start, func([]byte) { sent++ })
			require.NoError(t, err)
			c.chans[0].snd.write([]byte("a message nobody acknowledges"))
			c.flush()
			now := start
			for now.Sub(start) < 30*time.Second && c.err == nil {
				now = now.Add(r.tick)
				c.tick(now)
			}
			if tt.want == 0 {
				assert.NoError(t, c.err)
				return
			}
			require.ErrorIs(t, c.err, ErrAckTimeout)
			took := now.Sub(start)
			assert.GreaterOrEqual(t, took, tt.want, "gave up before the timeout")
			assert.LessOrEqual(t, took, tt.want+r.tick, "gave up late")
			assert.Greater(t, c.chans[0].snd.slots[0].sends, uint32(giveUpResends))
		})
	}
}

// TestSessionGivesUpOnSilentPeer runs a Session against a peer that reads
// every datagram and answers none (alive at the network level, it never
// acknowledges): the Session ends with ErrAckTimeout, named in an error
// that names the peer, and its goroutines exit.
func TestSessionGivesUpOnSilentPeer(t *testing.T) {
	a, b := simPair(t, 1, netsim.Config{})
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, err := b.Read(buf); err != nil {
				return
			}
		}
	}()
	s, err := NewSession(a, &Config{AckTimeout: time.Second})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Channel(0).Send([]byte("anyone there?")))
	_, err = s.Channel(0).Receive(make([]byte, 100))
	require.ErrorIs(t, err, ErrAckTimeout)
	var oe *net.OpError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, b.LocalAddr().String(), oe.Addr.String())
}

// resendLooks fills the window of a reliable channel (windowBytes) with a
// peer that receives every chunk but chunk 0, so that the window stays
// full, then has the peer send packets, and returns how many in-flight
// chunks the sender looked at per packet it received to pick its resends
// and copies.
func resendLooks(t *testing.T, windowBytes int) float64 {
	t.Helper()
	r, err := (&Config{Channels: []ChannelConfig{
		{Kind: ReliableOrdered, MaxMessageSize: 1000, WindowBytes: windowBytes}, {Kind: Unreliable},
	}}).resolve(false)
	require.NoError(t, err)
	now := time.Unix(1000, 0)
	var toA, toB wire
	var a *core
	a, err = newCore(r, now, func(p []byte) {
		for _, ref := range a.refs {
			if ref.ch == 0 && ref.seq == 0 {
				return // withheld
			}
		}
		toB.push(p)
	})
	require.NoError(t, err)
	b, err := newCore(r, now, toA.push)
	require.NoError(t, err)
	s := &a.chans[0].snd
	s.limit = 2 * windowBytes
	s.write(make([]byte, 2*windowBytes))
	window := uint32(r.chans[0].window)
	for range 1000 {
		if s.next-s.base == window {
			break
		}
		now = now.Add(r.tick)
		a.tick(now)
		toB.deliver(b, now)
		b.tick(now)
		toA.deliver(a, now)
	}
	require.Equal(t, window, s.next-s.base, "window not full")
	require.Equal(t, uint32(0), s.base, "chunk 0 delivered")
	const packets = 200
	before := a.looks
	for range packets {
		now = now.Add(100 * time.Microsecond)
		require.True(t, b.chans[1].usnd.push([]byte("state")))
		b.flush()
		toA.deliver(a, now)
		toB.deliver(b, now)
	}
	require.NoError(t, a.err)
	return float64(a.looks-before) / packets
}

// TestResendCostFlat checks that what a sender does per packet it
// receives, while a peer withholds chunk 0 and keeps its window full,
// does not grow with the window: 40ddb1a walked every chunk in flight, in
// flushChunk and in piggyback, for every packet received.
func TestResendCostFlat(t *testing.T) {
	small := resendLooks(t, 64<<10)
	big := resendLooks(t, 4<<20)
	t.Logf("chunks looked at per packet received: %.1f with a 64 KiB window, %.1f with 4 MiB", small, big)
	assert.LessOrEqual(t, big, small+2, "the cost grows with the window")
	assert.LessOrEqual(t, big, float64(fastList+1+piggybackLooks), "more than the list heads and the copies")
}

// TestHTTPSlowlorisNeedsTimeouts is docs/reliable.md's http.Server over
// Streams, against clients that send half a request header and hold it:
// with its ReadHeaderTimeout they are cut, their slots free, and
// a real request is served; with http.Serve's defaults (the README's
// example on 40ddb1a) they hold every slot of the server and the request
// is refused.
func TestHTTPSlowlorisNeedsTimeouts(t *testing.T) {
	tests := []struct {
		name   string
		srv    *http.Server
		served bool
	}{
		{"the docs' timeouts", &http.Server{ReadHeaderTimeout: 300 * time.Millisecond, IdleTimeout: time.Second}, true},
		{"no timeouts", &http.Server{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const slots = 3
			l, err := netcode.Listen("udp4", "127.0.0.1:0", &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey, MaxClients: slots})
			require.NoError(t, err)
			addr := netip.MustParseAddrPort(l.Addr().String())
			var id atomic.Uint64
			d := &Dialer{Token: func(context.Context, string, string) ([]byte, error) {
				return token.Generate(&token.Params{
					ProtocolID: testProtocolID, ClientID: id.Add(1), PrivateKey: testKey,
					ExpireSeconds: 30, TimeoutSeconds: 5, ServerAddrs: []netip.AddrPort{addr},
				})
			}}
			rl, err := NewListener(l, nil)
			require.NoError(t, err)
			srv := tt.srv
			srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
			served := make(chan error, 1)
			go func() { served <- srv.Serve(rl) }()
			defer func() {
				require.NoError(t, srv.Close())
				assert.ErrorIs(t, <-served, http.ErrServerClosed)
			}()

			for range slots {
				c, err := d.DialContext(ctxFor(t, 5*time.Second), "udp", "game")
				require.NoError(t, err)
				defer c.Close()
				_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: game\r\n") // and no more
				require.NoError(t, err)
			}
			if tt.served {
				require.Eventually(t, func() bool { return l.Stats().Connected < slots }, 5*time.Second, 10*time.Millisecond, "no slot freed")
			} else {
				time.Sleep(time.Second) // three times this test's ReadHeaderTimeout
				require.Equal(t, slots, l.Stats().Connected)
			}
			tr := &http.Transport{DialContext: d.DialContext}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			resp, err := client.Get("http://game/")
			if !tt.served {
				require.ErrorIs(t, err, netcode.ErrConnectionDenied, "every slot held")
				return
			}
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			assert.Equal(t, "ok", string(body))
		})
	}
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestWindowBytes checks how the receive window in bytes becomes chunks:
// rounded up, the channel's own setting first, then the Config's (a
// Stream's), then the default; a reliable-ordered channel's holds one
// largest message.
func TestWindowBytes(t *testing.T) {
	const chunk = 1168 // with one reliable channel
	tests := []struct {
		name   string
		cfg    Config
		stream bool
		want   int
	}{
		{"stream default", Config{}, true, (defaultWindowBytes + chunk - 1) / chunk},
		{"stream set", Config{WindowBytes: 4 << 20}, true, (4<<20 + chunk - 1) / chunk},
		{"channel from the config", Config{WindowBytes: 1 << 20, Channels: []ChannelConfig{{Kind: ReliableOrdered, MaxMessageSize: 1000}}}, false, (1<<20 + chunk - 1) / chunk},
		{"channel's own first", Config{WindowBytes: 1 << 20, Channels: []ChannelConfig{{Kind: ReliableOrdered, MaxMessageSize: 1000, WindowBytes: 10 * chunk}}}, false, 10},
		{"raised to hold a message", Config{Channels: []ChannelConfig{{Kind: ReliableOrdered, MaxMessageSize: 100 * chunk, WindowBytes: 1}}}, false, 102},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := tt.cfg.resolve(tt.stream)
			require.NoError(t, err)
			require.Equal(t, chunk, r.chunkMax)
			assert.Equal(t, tt.want, r.chans[0].window)
		})
	}
	_, err := (&Config{WindowBytes: -1}).resolve(true)
	assert.ErrorIs(t, err, errConfig)
}
