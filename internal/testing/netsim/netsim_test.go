package netsim

import (
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	t0 = time.Unix(1_800_000_000, 0)
	a  = netip.MustParseAddrPort("10.0.0.1:1000")
	b  = netip.MustParseAddrPort("10.0.0.2:2000")
	c6 = netip.MustParseAddrPort("[fd00::3]:3000")
)

// got is one delivered datagram.
type got struct {
	at       time.Time
	from, to netip.AddrPort
	id       uint32
}

// run sends count datagrams from → to, one per millisecond, each carrying
// its index, then delivers step by step for horizon and returns what came
// out.
func run(n *Network, count int, horizon time.Duration) []got {
	var out []got
	now := t0
	for i := range count {
		var p [4]byte
		binary.BigEndian.PutUint32(p[:], uint32(i))
		n.Send(now, a, b, p[:])
		now = now.Add(time.Millisecond)
		out = deliver(n, now, out)
	}
	for end := now.Add(horizon); now.Before(end); {
		now = now.Add(time.Millisecond)
		out = deliver(n, now, out)
	}
	return out
}

func deliver(n *Network, now time.Time, out []got) []got {
	n.Deliver(now, func(from, to netip.AddrPort, p []byte) {
		out = append(out, got{now, from, to, binary.BigEndian.Uint32(p)})
	})
	return out
}

func TestZeroConfigIsPerfect(t *testing.T) {
	n := New(1, Config{})
	out := run(n, 100, 0)
	require.Len(t, out, 100)
	for i, g := range out {
		assert.Equal(t, uint32(i), g.id)
		assert.Equal(t, a, g.from)
		assert.Equal(t, b, g.to)
	}
	assert.Equal(t, Stats{Sent: 100, Delivered: 100}, n.Stats())
	_, ok := n.NextDue()
	assert.False(t, ok)
}

func TestDeterministic(t *testing.T) {
	cfg := Config{Latency: 20 * time.Millisecond, Jitter: 15 * time.Millisecond, Loss: 0.2, Duplicate: 0.1, Reorder: 0.1, ReorderDelay: 30 * time.Millisecond}
	x := run(New(42, cfg), 2000, time.Second)
	y := run(New(42, cfg), 2000, time.Second)
	z := run(New(43, cfg), 2000, time.Second)
	assert.Equal(t, x, y, "same seed, same outcome")
	assert.NotEqual(t, x, z, "another seed, another outcome")
}

func TestRates(t *testing.T) {
	const count = 20000
	for _, tc := range []struct {
		name string
		cfg  Config
		want func(s Stats) (got, want float64)
	}{
		{"loss", Config{Loss: 0.25}, func(s Stats) (float64, float64) { return float64(s.Lost) / count, 0.25 }},
		{"delivered after loss", Config{Loss: 0.25}, func(s Stats) (float64, float64) { return float64(s.Delivered) / count, 0.75 }},
		{"duplicate", Config{Duplicate: 0.1}, func(s Stats) (float64, float64) { return float64(s.Duplicated) / count, 0.1 }},
		{"delivered with duplicates", Config{Duplicate: 0.1}, func(s Stats) (float64, float64) { return float64(s.Delivered) / count, 1.1 }},
		{"reorder", Config{Latency: time.Millisecond, Reorder: 0.3}, func(s Stats) (float64, float64) { return float64(s.Reordered) / count, 0.3 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := New(7, tc.cfg)
			run(n, count, time.Second)
			got, want := tc.want(n.Stats())
			// Binomial standard deviation is at most 0.0036 here; allow 4σ.
			assert.InDelta(t, want, got, 0.015)
		})
	}
}

func TestLossAll(t *testing.T) {
	n := New(1, Config{Loss: 1})
	assert.Empty(t, run(n, 100, time.Second))
	assert.Equal(t, Stats{Sent: 100, Lost: 100}, n.Stats())
}

func TestDuplicatesCarryTheSameBytes(t *testing.T) {
	n := New(3, Config{Duplicate: 1, Jitter: 5 * time.Millisecond})
	out := run(n, 50, time.Second)
	require.Len(t, out, 100)
	seen := map[uint32]int{}
	for _, g := range out {
		seen[g.id]++
	}
	for i := range uint32(50) {
		assert.Equal(t, 2, seen[i], "datagram %d", i)
	}
	assert.Equal(t, uint64(50), n.Stats().Duplicated)
}

func TestLatencyAndOrder(t *testing.T) {
	n := New(1, Config{Latency: 50 * time.Millisecond})
	for i, g := range run(n, 100, time.Second) {
		assert.Equal(t, uint32(i), g.id, "constant latency keeps order")
		sent := t0.Add(time.Duration(i) * time.Millisecond)
		assert.Equal(t, sent.Add(50*time.Millisecond), g.at)
	}
}

func TestJitterBounds(t *testing.T) {
	n := New(5, Config{Latency: 10 * time.Millisecond, Jitter: 20 * time.Millisecond})
	now := t0
	for i := range 1000 {
		n.Send(now, a, b, []byte{byte(i)})
	}
	var delays []time.Duration
	for range 40 {
		now = now.Add(time.Millisecond)
		n.Deliver(now, func(_, _ netip.AddrPort, _ []byte) { delays = append(delays, now.Sub(t0)) })
	}
	require.Len(t, delays, 1000)
	lo, hi := delays[0], delays[len(delays)-1]
	assert.GreaterOrEqual(t, lo, 10*time.Millisecond)
	assert.LessOrEqual(t, hi, 30*time.Millisecond)
	assert.Less(t, lo, 13*time.Millisecond, "jitter spreads the delays")
	assert.Greater(t, hi, 27*time.Millisecond, "jitter spreads the delays")
}

func TestReorder(t *testing.T) {
	n := New(9, Config{Latency: 10 * time.Millisecond, Reorder: 0.2, ReorderDelay: 25 * time.Millisecond})
	out := run(n, 500, time.Second)
	require.Len(t, out, 500)
	inversions := 0
	for i := 1; i < len(out); i++ {
		if out[i].id < out[i-1].id {
			inversions++
		}
	}
	assert.Positive(t, inversions)
	st := n.Stats()
	assert.Positive(t, st.Reordered)
	// A reordered datagram is late by exactly ReorderDelay.
	late := 0
	for _, g := range out {
		sent := t0.Add(time.Duration(g.id) * time.Millisecond)
		switch g.at.Sub(sent) {
		case 10 * time.Millisecond:
		case 35 * time.Millisecond:
			late++
		default:
			t.Fatalf("datagram %d took %v", g.id, g.at.Sub(sent))
		}
	}
	assert.Equal(t, int(st.Reordered), late)
}

func TestReorderDelayDefault(t *testing.T) {
	n := New(1, Config{Latency: 10 * time.Millisecond, Reorder: 1})
	n.Send(t0, a, b, []byte{1})
	due, ok := n.NextDue()
	require.True(t, ok)
	assert.Equal(t, t0.Add(20*time.Millisecond), due)

	n = New(1, Config{Reorder: 1})
	n.Send(t0, a, b, []byte{1})
	due, _ = n.NextDue()
	assert.Equal(t, t0.Add(time.Millisecond), due)
}

func TestTiesInSendOrder(t *testing.T) {
	n := New(1, Config{Latency: 10 * time.Millisecond})
	for i := range 200 {
		n.Send(t0, a, b, []byte{byte(i)})
	}
	var ids []byte
	n.Deliver(t0.Add(time.Hour), func(_, _ netip.AddrPort, p []byte) { ids = append(ids, p[0]) })
	require.Len(t, ids, 200)
	for i, id := range ids {
		require.Equal(t, byte(i), id)
	}
}

func TestDeliverDueOnly(t *testing.T) {
	n := New(1, Config{Latency: 10 * time.Millisecond})
	n.Send(t0, a, b, []byte("x"))
	called := 0
	fn := func(_, _ netip.AddrPort, _ []byte) { called++ }
	n.Deliver(t0.Add(9*time.Millisecond), fn)
	assert.Zero(t, called)
	due, ok := n.NextDue()
	require.True(t, ok)
	assert.Equal(t, t0.Add(10*time.Millisecond), due)
	n.Deliver(due, fn)
	assert.Equal(t, 1, called, "due at exactly now is delivered")
}

// TestSendDuringDeliver: a reply sent from the callback, even with no
// latency, waits for the next Deliver.
func TestSendDuringDeliver(t *testing.T) {
	n := New(1, Config{})
	n.Send(t0, a, b, []byte{0})
	var trace []string
	echo := func(from, to netip.AddrPort, p []byte) {
		trace = append(trace, fmt.Sprintf("%v→%v %d", from, to, p[0]))
		if p[0] < 3 {
			n.Send(t0, to, from, []byte{p[0] + 1})
		}
	}
	for range 5 {
		n.Deliver(t0, echo)
		trace = append(trace, "|")
	}
	assert.Equal(t, []string{
		"10.0.0.1:1000→10.0.0.2:2000 0", "|",
		"10.0.0.2:2000→10.0.0.1:1000 1", "|",
		"10.0.0.1:1000→10.0.0.2:2000 2", "|",
		"10.0.0.2:2000→10.0.0.1:1000 3", "|",
		"|",
	}, trace)
}

// TestNestedDeliver: Deliver from inside the callback is allowed.
func TestNestedDeliver(t *testing.T) {
	n := New(1, Config{})
	n.Send(t0, a, b, []byte{0})
	var ids []byte
	n.Deliver(t0, func(_, _ netip.AddrPort, p []byte) {
		ids = append(ids, p[0])
		if p[0] == 0 {
			n.Send(t0, a, b, []byte{1})
			n.Deliver(t0, func(_, _ netip.AddrPort, p []byte) { ids = append(ids, p[0]) })
		}
	})
	assert.Equal(t, []byte{0, 1}, ids)
}

func TestSendCopies(t *testing.T) {
	n := New(1, Config{Latency: time.Millisecond})
	p := []byte("hello")
	n.Send(t0, a, b, p)
	copy(p, "xxxxx")
	big := make([]byte, 5000)
	big[4999] = 7
	n.Send(t0, a, b, big)
	var bodies [][]byte
	n.Deliver(t0.Add(time.Second), func(_, _ netip.AddrPort, p []byte) { bodies = append(bodies, append([]byte(nil), p...)) })
	require.Len(t, bodies, 2)
	assert.Equal(t, "hello", string(bodies[0]))
	assert.Equal(t, big, bodies[1])
	// Recycled buffers do not leak old bytes.
	n.Send(t0, a, b, []byte("ab"))
	n.Deliver(t0.Add(time.Second), func(_, _ netip.AddrPort, p []byte) { assert.Equal(t, "ab", string(p)) })
	n.Send(t0, a, b, nil)
	n.Deliver(t0.Add(time.Second), func(_, _ netip.AddrPort, p []byte) { assert.Empty(t, p) })
}

func TestSetLink(t *testing.T) {
	n := New(1, Config{Latency: 10 * time.Millisecond})
	n.SetLink(a, b, Config{Loss: 1})
	n.SetLink(b, c6, Config{Latency: 100 * time.Millisecond})
	n.Send(t0, a, b, []byte("lost"))
	n.Send(t0, b, a, []byte("default"))
	n.Send(t0, b, c6, []byte("slow"))
	n.Send(t0, a, c6, []byte("default too"))
	var at = map[string]time.Duration{}
	for now := t0; now.Before(t0.Add(time.Second)); now = now.Add(time.Millisecond) {
		n.Deliver(now, func(_, _ netip.AddrPort, p []byte) { at[string(p)] = now.Sub(t0) })
	}
	assert.Equal(t, map[string]time.Duration{
		"default":     10 * time.Millisecond,
		"slow":        100 * time.Millisecond,
		"default too": 10 * time.Millisecond,
	}, at)
	assert.Equal(t, uint64(1), n.Stats().Lost)

	// Overriding again replaces the override; in-flight datagrams keep
	// their schedule.
	n.Send(t0, b, c6, []byte("x"))
	n.SetLink(b, c6, Config{})
	n.Send(t0, b, c6, []byte("y"))
	var order []string
	n.Deliver(t0.Add(time.Second), func(_, _ netip.AddrPort, p []byte) { order = append(order, string(p)) })
	assert.Equal(t, []string{"y", "x"}, order)
}

func TestMaxQueue(t *testing.T) {
	n := New(1, Config{Latency: 10 * time.Millisecond, MaxQueue: 5})
	for i := range 8 {
		n.Send(t0, a, b, []byte{byte(i)})
	}
	n.Send(t0, b, a, []byte{100}) // another link has its own bound
	assert.Equal(t, uint64(3), n.Stats().Dropped)
	assert.Equal(t, 6, n.InFlight())
	var ids []byte
	n.Deliver(t0.Add(10*time.Millisecond), func(_, _ netip.AddrPort, p []byte) { ids = append(ids, p[0]) })
	assert.Equal(t, []byte{0, 1, 2, 3, 4, 100}, ids)
	// Room again once delivered.
	n.Send(t0.Add(10*time.Millisecond), a, b, []byte{9})
	assert.Equal(t, 1, n.InFlight())
	assert.Equal(t, uint64(3), n.Stats().Dropped)

	// Duplicates count against the bound too.
	n = New(1, Config{Latency: time.Millisecond, MaxQueue: 3, Duplicate: 1})
	for range 2 {
		n.Send(t0, a, b, []byte{1})
	}
	st := n.Stats()
	assert.Equal(t, 3, n.InFlight())
	assert.Equal(t, uint64(1), st.Dropped)
	assert.Equal(t, uint64(2), st.Duplicated)
}

func TestStatsBalance(t *testing.T) {
	n := New(11, Config{Latency: 5 * time.Millisecond, Jitter: 5 * time.Millisecond, Loss: 0.1, Duplicate: 0.1, Reorder: 0.1, MaxQueue: 4})
	run(n, 5000, time.Second)
	s := n.Stats()
	assert.Equal(t, s.Sent-s.Lost+s.Duplicated, s.Delivered+s.Dropped, "%+v", s)
	assert.Positive(t, s.Dropped)
	assert.Zero(t, n.InFlight())
}

func TestHeapOrderRandom(t *testing.T) {
	n := New(1, Config{})
	r := New(99, Config{}).rng
	for i := range 5000 {
		n.Send(t0.Add(time.Duration(r.IntN(1000))*time.Millisecond), a, b, []byte{byte(i)})
	}
	last := time.Time{}
	count := 0
	for now := t0; count < 5000; now = now.Add(time.Millisecond) {
		n.Deliver(now, func(_, _ netip.AddrPort, _ []byte) {
			assert.False(t, now.Before(last))
			last = now
			count++
		})
		due, ok := n.NextDue()
		if ok {
			assert.True(t, due.After(now))
		}
	}
}

func TestSteadyStateAllocs(t *testing.T) {
	n := New(1, Config{Latency: time.Millisecond, Jitter: time.Millisecond, Loss: 0.1})
	p := make([]byte, 100)
	now := t0
	fn := func(_, _ netip.AddrPort, _ []byte) {}
	step := func() {
		for range 10 {
			n.Send(now, a, b, p)
		}
		now = now.Add(5 * time.Millisecond)
		n.Deliver(now, fn)
	}
	for range 100 {
		step()
	}
	allocs := testing.AllocsPerRun(1000, step)
	assert.Zero(t, math.Round(allocs))
}

func BenchmarkSendDeliver(b *testing.B) {
	n := New(1, Config{Latency: time.Millisecond, Jitter: time.Millisecond})
	p := make([]byte, 100)
	now := t0
	fn := func(_, _ netip.AddrPort, _ []byte) {}
	b.ReportAllocs()
	for b.Loop() {
		for range 64 {
			n.Send(now, a, c6, p)
		}
		now = now.Add(time.Millisecond)
		n.Deliver(now, fn)
	}
	b.ReportMetric(float64(b.N*64)/b.Elapsed().Seconds(), "pkts/s")
}
