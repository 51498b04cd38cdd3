package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"runtime/pprof"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHistogramBuckets(t *testing.T) {
	for _, v := range []uint64{0, 1, 15, 16, 17, 31, 32, 33, 1000, 123456789, 1 << 40, 1<<63 + 12345, ^uint64(0)} {
		i := bucketOf(v)
		require.Less(t, i, histBuckets, "v=%d", v)
		lo := bucketLow(i)
		assert.LessOrEqual(t, lo, v, "v=%d", v)
		if i+1 < histBuckets {
			assert.Greater(t, bucketLow(i+1), v, "v=%d", v)
		}
		if v >= 16 {
			assert.LessOrEqual(t, float64(v-lo)/float64(v), 1.0/16, "v=%d", v)
		}
	}
}

func TestHistogramQuantile(t *testing.T) {
	var h, h2 Histogram
	assert.Zero(t, h.Quantile(0.5))
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	h2.Record(-time.Second)
	h.Merge(&h2)
	assert.EqualValues(t, 1001, h.Count())
	assert.Equal(t, time.Millisecond, h.Max())
	tests := []struct {
		q    float64
		want time.Duration
	}{
		{0.5, 500 * time.Microsecond},
		{0.99, 990 * time.Microsecond},
		{1, time.Millisecond},
	}
	for _, tc := range tests {
		got := h.Quantile(tc.q)
		assert.InEpsilon(t, float64(tc.want), float64(got), 0.04, "q=%v got %v", tc.q, got)
	}
	assert.Zero(t, h.Quantile(0))
}

func TestCPUBySide(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, pprof.StartCPUProfile(&buf))
	done := make(chan struct{})
	spin := func(side string) {
		pprof.Do(context.Background(), pprof.Labels(LabelKey, side), func(context.Context) {
			go func() {
				defer func() { done <- struct{}{} }()
				end := time.Now().Add(300 * time.Millisecond)
				x := 0
				for time.Now().Before(end) {
					x++
				}
				_ = x
			}()
		})
	}
	spin(SideServer)
	spin(SideClient)
	<-done
	<-done
	pprof.StopCPUProfile()
	by, err := cpuBySide(buf.Bytes(), LabelKey)
	require.NoError(t, err)
	assert.Greater(t, by[SideServer], int64(0))
	assert.Greater(t, by[SideClient], int64(0))

	_, err = cpuBySide([]byte("not gzip"), LabelKey)
	assert.Error(t, err)
}

func TestConfigFill(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{}, true},
		{"too small", Config{Size: 8}, false},
		{"too large", Config{Size: 1201}, false},
		{"negative rate", Config{Rate: -1}, false},
		{"negative clients", Config{Clients: -1}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.fill()
			if tc.ok {
				require.NoError(t, err)
				assert.Equal(t, 1, tc.cfg.Clients)
				assert.Equal(t, 64, tc.cfg.Size)
				assert.Equal(t, 8, tc.cfg.Window)
			} else {
				assert.Error(t, err)
			}
		})
	}
}

func TestRunSmall(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"flat out with baseline", Config{Clients: 4, Size: 100, Duration: time.Second, Warmup: 200 * time.Millisecond, Baseline: true}},
		{"rate", Config{Clients: 4, Size: 32, Rate: 50, Duration: time.Second, Warmup: -1}},
		{"connect only", Config{Clients: 4}},
		{"rounds", Config{Clients: 2, Duration: 400 * time.Millisecond, Warmup: -1, Baseline: true, Rounds: 3}},
		{"server process", Config{Clients: 4, Size: 100, Duration: time.Second, Warmup: 200 * time.Millisecond, ServerProcess: true}},
		{"light", Config{Clients: 8, Size: 64, Rate: 50, Duration: time.Second, Warmup: -1, Light: true}},
		// Two sockets, each with its pacer, whose held payloads leave at
		// each flush.
		{"light, two sockets", Config{Clients: lightGroupSize + 3, Size: 64, Rate: 5, Duration: time.Second, Warmup: -1, Light: true}},
		{"light flat out, server process", Config{Clients: 4, Size: 100, Duration: 500 * time.Millisecond, Warmup: -1, Light: true, ServerProcess: true}},
		{"cute beside netcode", Config{Clients: 4, Size: 100, Duration: 500 * time.Millisecond, Warmup: -1, Dialect: "cute"}},
		{"cute beside netcode, server processes", Config{Clients: 4, Size: 100, Duration: 500 * time.Millisecond, Warmup: -1, Dialect: "cute", ServerProcess: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cfg.ServerProcess {
				tc.cfg.Child = testChild(t)
			}
			if tc.cfg.Light && runtime.GOOS != "linux" {
				t.Skip("the light generator needs Linux's IP_PKTINFO")
			}
			var progress, out, prof bytes.Buffer
			tc.cfg.Progress = &progress
			tc.cfg.ProgressEvery = 300 * time.Millisecond
			tc.cfg.CPUProfile = &prof
			res, err := Run(context.Background(), tc.cfg)
			require.NoError(t, err)
			res.Print(&out)
			t.Log("\n" + progress.String() + out.String())
			if tc.cfg.Dialect == "cute" {
				require.NotNil(t, res.Cute)
				c := res.Cute
				assert.Equal(t, tc.cfg.Clients, c.Connected)
				assert.Zero(t, c.Timeouts)
				assert.Greater(t, c.RoundTrips, uint64(0))
				assert.Greater(t, c.EchoesPerCPUSecond, 0.0)
				assert.Contains(t, out.String(), "== cute")
				if tc.cfg.ServerProcess {
					// Cute's server is a child process too: its CPU is
					// measured, its datagrams counted there.
					assert.Greater(t, c.ServerCPU, time.Duration(0))
					assert.Greater(t, c.ServerPackets, uint64(0))
				}
			} else {
				assert.Nil(t, res.Cute)
			}
			n := res.Netcode
			assert.Equal(t, tc.cfg.Clients, n.Connected)
			assert.Greater(t, n.ConnectsPerSec, 0.0)
			assert.Zero(t, n.Timeouts)
			assert.Zero(t, n.Disconnects)
			if tc.cfg.Duration == 0 {
				assert.Zero(t, n.RoundTrips)
				return
			}
			// The report must agree with itself. How fast the machine is
			// is not asserted: TestPacer checks the pacing on a fake clock.
			assert.Greater(t, n.Sent, uint64(0))
			assert.Greater(t, n.RoundTrips, uint64(0))
			assert.Greater(t, n.Window, time.Duration(0))
			assert.InEpsilon(t, float64(n.RoundTrips)/n.Window.Seconds(), n.RoundTripsPerSec, 1e-9)
			assert.InEpsilon(t, float64(n.Sent)/n.Window.Seconds(), n.SentPerSec, 1e-9)
			assert.Greater(t, n.P50, time.Duration(0))
			assert.GreaterOrEqual(t, n.P99, n.P50)
			assert.GreaterOrEqual(t, n.Max, n.P99)
			assert.Greater(t, n.ProcessCPU, time.Duration(0))
			assert.NotZero(t, prof.Len())
			if tc.cfg.Rate > 0 {
				// A few payloads a second cannot fill a read queue.
				assert.Zero(t, n.Dropped)
			}
			if tc.cfg.ServerProcess {
				// The server is the child's: its CPU is measured, its
				// counters are not in this process.
				assert.Nil(t, n.ServerStats)
				assert.Greater(t, n.ServerCPU, time.Duration(0))
				assert.Greater(t, n.ServerPackets, uint64(0))
				if runtime.GOOS == "linux" {
					// Its goroutine runs and context switches per echo.
					assert.Greater(t, n.ServerRunsPerEcho, 0.0)
					assert.Contains(t, out.String(), "goroutine runs")
				}
			} else {
				assert.NotNil(t, n.ServerStats)
			}
			if tc.cfg.Rounds > 1 {
				require.Len(t, res.Rounds, tc.cfg.Rounds)
				assert.Contains(t, out.String(), "median round of 3")
			}
			if tc.cfg.Baseline {
				require.NotNil(t, res.Raw)
				assert.Greater(t, res.Raw.RoundTrips, uint64(0))
				assert.Greater(t, res.Ratio, 0.0)
			}
		})
	}
}

// fakeEndpoint records the payloads a client sends, with no network.
type fakeEndpoint struct {
	mu    sync.Mutex
	fail  bool            // Write fails
	seqs  []uint64        // sequence numbers written, in order
	stamp []time.Duration // send times written (since the run's epoch)
}

func (e *fakeEndpoint) Write(b []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seqs = append(e.seqs, binary.LittleEndian.Uint64(b[0:8]))
	e.stamp = append(e.stamp, time.Duration(binary.LittleEndian.Uint64(b[8:16])))
	if e.fail {
		return 0, errors.New("fake write error")
	}
	return len(b), nil
}

func (e *fakeEndpoint) Read([]byte) (int, error) { return 0, io.EOF }
func (e *fakeEndpoint) Close() error             { return nil }

// TestPacer checks the rate mode against synctest's fake clock, so the
// result does not depend on the machine's speed: every client sends one
// payload each 1/Rate seconds at its own phase (client i of n at i/n of
// the period), at most pacerQuantum late, with consecutive sequence
// numbers, and failed writes are not counted as sent.
func TestPacer(t *testing.T) {
	tests := []struct {
		name    string
		clients int
		rate    float64
		fail    bool
	}{
		{"one client", 1, 50, false},
		{"three clients", 3, 2.5, false},
		{"one per quantum", 10, 100, false},
		{"several per quantum", 130, 50, false},
		{"several groups", 2*pacerGroup + 100, 10, false},
		{"fast", 10, 200, false},
		{"write errors", 2, 50, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := Config{Clients: tc.clients, Rate: tc.rate, Size: MinSize}
				require.NoError(t, cfg.fill())
				r := newRun(context.Background(), &cfg, "test")
				eps := make([]*fakeEndpoint, tc.clients)
				r.clients = make([]*client, tc.clients)
				for i := range eps {
					eps[i] = &fakeEndpoint{fail: tc.fail}
					r.clients[i] = &client{ep: eps[i]}
				}
				period := time.Duration(float64(time.Second) / tc.rate)
				run := time.Second + period/2
				r.startTraffic()
				time.Sleep(run)
				close(r.stopSend)
				r.senders.Wait()

				late := time.Duration(0)
				for i, ep := range eps {
					phase := sendPhase(i, tc.clients, period)
					// Every payload due a quantum before the senders
					// stop is sent; one due in that last quantum may be.
					want := int((run-phase)/period) + 1
					if sure := int((run-pacerQuantum-phase)/period) + 1; len(ep.stamp) == sure {
						want = sure
					}
					require.Len(t, ep.stamp, want, "client %d", i)
					for k := range want {
						due := phase + time.Duration(k)*period
						require.GreaterOrEqual(t, ep.stamp[k], due, "client %d send %d", i, k)
						require.Less(t, ep.stamp[k], due+pacerQuantum, "client %d send %d", i, k)
						late = max(late, ep.stamp[k]-due)
						if tc.fail {
							// The failed send's number is taken back.
							assert.Equal(t, uint64(1), ep.seqs[k], "client %d send %d", i, k)
						} else {
							assert.Equal(t, uint64(k+1), ep.seqs[k], "client %d send %d", i, k)
						}
					}
					if tc.fail {
						assert.Zero(t, r.clients[i].sent.Load(), "client %d", i)
					} else {
						assert.Equal(t, uint64(want), r.clients[i].sent.Load(), "client %d", i)
					}
				}
				if period/time.Duration(tc.clients) >= pacerQuantum {
					// A pacer that wakes for each payload sends it on time.
					assert.Zero(t, late)
				}
			})
		})
	}
}

func TestMedianRound(t *testing.T) {
	raw := &Phase{}
	tests := []struct {
		name string
		in   []Round
		want float64 // ratio, or netcode payloads/s without a baseline
	}{
		{"one", []Round{{Raw: raw, Ratio: 0.5}}, 0.5},
		{"odd", []Round{{Raw: raw, Ratio: 0.9}, {Raw: raw, Ratio: 0.2}, {Raw: raw, Ratio: 0.7}}, 0.7},
		{"even takes the lower", []Round{{Raw: raw, Ratio: 0.9}, {Raw: raw, Ratio: 0.2}, {Raw: raw, Ratio: 0.7}, {Raw: raw, Ratio: 0.8}}, 0.7},
		{"no baseline", []Round{{Netcode: Phase{RoundTripsPerSec: 3}}, {Netcode: Phase{RoundTripsPerSec: 1}}, {Netcode: Phase{RoundTripsPerSec: 2}}}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := medianRound(tc.in)
			if m.Raw != nil {
				assert.Equal(t, tc.want, m.Ratio)
			} else {
				assert.Equal(t, tc.want, m.Netcode.RoundTripsPerSec)
			}
		})
	}
}

func TestRunCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	start := time.Now()
	_, err := Run(ctx, Config{Clients: 2, Duration: time.Minute, Baseline: true})
	assert.ErrorIs(t, err, context.Canceled)
	// Not a speed bound: a run that ignored the cancellation would last the
	// whole minute; anything well short of that honoured it.
	assert.Less(t, time.Since(start), 30*time.Second)
}

// TestCheckFDs checks that a run is refused before it starts when the
// descriptor limit cannot hold one socket per client, and allowed when it
// can.
func TestCheckFDs(t *testing.T) {
	soft, _, ok := fdLimit()
	if !ok || soft > 1<<30 {
		t.Skip("this system has no finite descriptor limit")
	}
	tests := []struct {
		name    string
		clients int
		ok      bool
	}{
		{"one", 1, true},
		{"within", int(soft) - fdSpare, true},
		{"one past", int(soft) - fdSpare + 1, false},
		{"far past", int(soft) * 2, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkFDs(tc.clients, false)
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, "file descriptors")
			}
		})
	}
}
