package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseProcStat(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want time.Duration
		ok   bool
	}{
		{"plain", "4242 (netcode) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 130 0 0 20 0 9 0 100 0 0", 3800 * time.Millisecond, true},
		{"name with spaces and parens", "7 (a) b (c)) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 5", 30 * time.Millisecond, true},
		{"zero", "1 (x) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0", 0, true},
		{"no name", "1 x S 0 1 1 0 -1 0 0 0 0 0 1 2 0 0", 0, false},
		{"too few fields", "1 (x) S 0 1 1 0 -1 0 0 0 0 0 1", 0, false},
		{"negative", "1 (x) S 0 1 1 0 -1 0 0 0 0 0 -1 2 0 0", 0, false},
		{"not a number", "1 (x) S 0 1 1 0 -1 0 0 0 0 0 1 two 0 0", 0, false},
		{"out of range", "1 (x) S 0 1 1 0 -1 0 0 0 0 0 9223372036854775807 1 0 0", 0, false},
		{"empty", "", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcStat([]byte(tc.in))
			if !tc.ok {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseMachineStat(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want time.Duration
		ok   bool
	}{
		{"two CPUs", "cpu  100 20 30 5000 7 1 2 3 0 0\ncpu0 50 10 15 2500 3 1 1 1 0 0\n", 1560 * time.Millisecond, true},
		{"no guest columns", "cpu 1 0 0 9 9 0 0 0", 10 * time.Millisecond, true},
		{"per-CPU line first", "cpu0 1 0 0 9 9 0 0 0\n", 0, false},
		{"too few fields", "cpu 1 2 3 4 5 6 7", 0, false},
		{"not a number", "cpu 1 2 3 4 5 6 7 x", 0, false},
		{"out of range", "cpu 9223372036854775807 9223372036854775807 0 0 0 0 0 0", 0, false},
		{"empty", "", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMachineStat([]byte(tc.in))
			if !tc.ok {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestProcSelf reads this process's own /proc entries, where there are.
func TestProcSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		_, ok := procCPU(os.Getpid())
		assert.False(t, ok)
		_, ok = machineCPU()
		assert.False(t, ok)
		return
	}
	_, ok := procCPU(os.Getpid())
	assert.True(t, ok)
	n, ok := procFDs(os.Getpid())
	assert.True(t, ok)
	assert.Positive(t, n) // stdin, stdout, stderr at least
	_, ok = procCPU(-1)
	assert.False(t, ok)
	_, ok = machineCPU()
	assert.True(t, ok)
}

func TestSplitCPU(t *testing.T) {
	tests := []struct {
		name           string
		by             map[string]time.Duration
		bridge, server time.Duration
		ok             bool
	}{
		{"three to one", map[string]time.Duration{sideBridge: 30, SideServer: 10, "": 40}, 750, 250, true},
		{"bridge only", map[string]time.Duration{sideBridge: 5}, 1000, 0, true},
		{"no labelled sample", map[string]time.Duration{"": 40}, 0, 0, false},
		{"no sample", nil, 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, s, ok := splitCPU(1000, tc.by)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.bridge, b)
			assert.Equal(t, tc.server, s)
		})
	}
}

func TestBridgeConfigFill(t *testing.T) {
	tests := []struct {
		name string
		cfg  BridgeConfig
		ok   bool
	}{
		{"relay defaults", BridgeConfig{Mode: ModeRelay}, true},
		{"transport defaults", BridgeConfig{Mode: ModeTransport}, true},
		{"wt-relay defaults", BridgeConfig{Mode: ModeWTRelay}, true},
		{"wt-transport defaults", BridgeConfig{Mode: ModeWTTransport}, true},
		{"wire defaults", BridgeConfig{Mode: ModeWire}, true},
		{"wt-wire defaults", BridgeConfig{Mode: ModeWTWire}, true},
		{"cute through the wire", BridgeConfig{Mode: ModeWire, Dialect: "cute"}, true},
		{"cute through the relay", BridgeConfig{Mode: ModeRelay, Dialect: "cute"}, false},
		{"unknown dialect", BridgeConfig{Mode: ModeWire, Dialect: "quic"}, false},
		{"no mode", BridgeConfig{}, false},
		{"unknown mode", BridgeConfig{Mode: "udp"}, false},
		{"negative clients", BridgeConfig{Mode: ModeRelay, Clients: -1}, false},
		{"too small", BridgeConfig{Mode: ModeRelay, Size: 8}, false},
		{"too large", BridgeConfig{Mode: ModeRelay, Size: 1201}, false},
		{"negative rate", BridgeConfig{Mode: ModeRelay, Rate: -1}, false},
		{"idle past the idle timeout", BridgeConfig{Mode: ModeRelay, Idle: time.Minute}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.fill()
			if !tc.ok {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, 1, tc.cfg.Clients)
			assert.Equal(t, DefaultBridgeSize, tc.cfg.Size)
			assert.Equal(t, float64(DefaultBridgeRate), tc.cfg.Rate)
			assert.Equal(t, time.Second, tc.cfg.Warmup)
		})
	}
}

// TestRunBridge runs both modes end to end with a few browsers: the
// server and bridge processes are this test binary (see TestMain). It
// checks that the report is filled in and consistent, never how fast
// anything was.
func TestRunBridge(t *testing.T) {
	type variant struct{ mode, dialect string }
	variants := []variant{{ModeRelay, ""}, {ModeTransport, ""}, {ModeWTRelay, ""}, {ModeWTTransport, ""}, {ModeWire, ""}, {ModeWTWire, ""}, {ModeWebSocket, ""},
		// Cute clients through the wire, as Cute Framework's web builds
		// (over WebSocket: wt-wire/cute differs only in the transport
		// the Dialer is given, which wt-wire runs).
		{ModeWire, "cute"}}
	for _, v := range variants {
		mode := v.mode
		t.Run(strings.TrimSuffix(mode+"/"+v.dialect, "/"), func(t *testing.T) {
			floor := mode == ModeWebSocket // no netcode server
			var progress, out bytes.Buffer
			prof := filepath.Join(t.TempDir(), "cpu")
			cfg := BridgeConfig{
				CPUProfile:    prof,
				Mode:          mode,
				Dialect:       v.dialect,
				Clients:       8,
				Duration:      time.Second,
				Warmup:        200 * time.Millisecond,
				Idle:          300 * time.Millisecond,
				Child:         testChild(t),
				Progress:      &progress,
				ProgressEvery: 300 * time.Millisecond,
			}
			res, err := RunBridge(context.Background(), cfg)
			require.NoError(t, err, progress.String())
			res.Print(&out)
			t.Log("\n" + progress.String() + out.String())

			assert.Equal(t, 8, res.Connected)
			assert.Empty(t, res.DialErrors)
			assert.Positive(t, res.ConnectTime)
			assert.Positive(t, res.Window)
			assert.Positive(t, res.Sent)
			assert.Positive(t, res.Echoed)
			assert.Positive(t, res.EchoesPerSec)
			assert.Positive(t, res.P50)
			assert.GreaterOrEqual(t, res.P99, res.P50)
			assert.GreaterOrEqual(t, res.Max, res.P99)
			assert.LessOrEqual(t, res.TotalEchoed, res.TotalSent)
			assert.Equal(t, res.TotalSent-res.TotalEchoed, res.Lost)
			assert.Zero(t, res.Lost, "nothing is lost on loopback at 8 browsers")
			assert.Zero(t, res.Dropped)
			assert.Zero(t, res.Timeouts)
			assert.Zero(t, res.Disconnects, res.EndErrors)
			assert.Positive(t, res.IdleWindow)
			assert.GreaterOrEqual(t, res.OtherCores, 0.0)
			assert.GreaterOrEqual(t, res.IdleOtherCores, 0.0)
			assert.Equal(t, transportMode(mode), res.Shared)

			b := res.Bridge
			assert.Positive(t, b.PID)
			if floor {
				assert.Zero(t, res.Server.PID)
				assert.False(t, res.Server.CPUMeasured)
				assert.False(t, res.Server.IdleMeasured)
			} else {
				assert.Positive(t, res.Server.PID)
				assert.Equal(t, res.Shared, b.PID == res.Server.PID)
			}
			assert.Positive(t, b.GoroutinesPerSession, "each session has goroutines in the bridge")
			assert.Positive(t, b.StackPerSession)
			if runtime.GOOS == "linux" {
				assert.True(t, b.FDs)
				if mode != ModeWTTransport { // whose sessions share the server's UDP socket
					assert.GreaterOrEqual(t, b.FDsPerSession, 1.0, "each session has its TCP connection or UDP socket")
				}
				assert.True(t, b.WakesMeasured, "goroutine runs and context switches counted")
				assert.Positive(t, b.RunsPerEcho, "at least the session's reader runs for an echo")
				assert.Equal(t, !floor && !res.Shared, res.Server.WakesMeasured)
				if !res.Shared {
					assert.True(t, b.CPUMeasured)
					assert.Equal(t, !floor, res.Server.CPUMeasured)
					assert.True(t, b.IdleMeasured)
				}
			}
			for _, p := range []ProcessCost{res.Bridge, res.Server} {
				assert.GreaterOrEqual(t, p.CPU, time.Duration(0))
				assert.GreaterOrEqual(t, p.IdleCPU, time.Duration(0))
				assert.GreaterOrEqual(t, p.MicrosPerEcho, 0.0)
				if p.CPUMeasured {
					assert.InDelta(t, p.CPU.Seconds()/res.Window.Seconds(), p.Cores, 1e-9)
				}
			}

			// The table row has a cell for every column of the header.
			header := strings.SplitN(BridgeTableHeader, "\n", 2)[0]
			row := res.TableRow()
			assert.Equal(t, strings.Count(header, "|"), strings.Count(row, "|"), row)
			assert.True(t, strings.HasPrefix(row, "| "+mode+" | 8 | "), row)
			assert.Contains(t, out.String(), row)

			// The children's profiles of the window.
			roles := []string{roleRelay, roleServer}
			switch {
			case transportMode(mode):
				roles = []string{roleTransport}
			case mode == ModeWebSocket:
				roles = []string{roleWebSocket}
			case wireMode(mode) && v.dialect == "cute":
				roles = []string{roleWire, roleCute}
			case wireMode(mode):
				roles = []string{roleWire, roleServer}
			}
			for _, role := range roles {
				b, err := os.ReadFile(prof + "." + role)
				require.NoError(t, err)
				_, err = cpuBySide(b, LabelKey)
				assert.NoError(t, err, "a CPU profile")
			}

			var back BridgeResult
			js, err := json.Marshal(res)
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(js, &back))
			assert.Equal(t, res.Echoed, back.Echoed)
			assert.Equal(t, res.Bridge, back.Bridge)
		})
	}
}

// TestRunBridgeChildFails checks that a child that cannot start is
// reported, with what it said.
func TestRunBridgeChildFails(t *testing.T) {
	_, err := RunBridge(context.Background(), BridgeConfig{Mode: ModeRelay, Child: append(testChild(t), "-no-such-flag")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "server process")
}

// TestRunBridgeCancelled checks that a run whose context ends returns its
// error, not figures, and stops its child processes (stopChildren waits
// for them).
func TestRunBridgeCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := RunBridge(ctx, BridgeConfig{Mode: ModeRelay, Clients: 4, Duration: time.Second, Child: testChild(t)})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, res)
}

func TestReportUnits(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0.00 ms"},
		{1475 * time.Microsecond, "1.48 ms"},
		{53477 * time.Microsecond, "53.5 ms"},
		{1241514 * time.Microsecond, "1242 ms"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, millis(tc.d))
	}
	assert.Equal(t, "76.1 KB", kb(76100))
}

// TestRunChild runs a child in this process: its ready line, its answers,
// its refusals, and its end when stdin closes.
func TestRunChild(t *testing.T) {
	key := strings.Repeat("ab", 32) + "\n"
	tests := []struct {
		name    string
		args    []string
		stdin   string
		wantErr string   // RunChild's error
		want    []string // in stdout, in order
	}{
		{"unknown role", []string{"-role", "proxy"}, key, `unknown role "proxy"`, []string{`"Err":"bench child: unknown role`}},
		{"no key", []string{"-role", roleServer}, "", "private key", nil},
		{"short key", []string{"-role", roleServer}, "abcd\n", "private key", nil},
		{"bad relay address", []string{"-role", roleRelay, "-allow", "nowhere"}, "", "nowhere", []string{`"Err"`}},
		{"server", []string{"-role", roleServer, "-max", "2"}, key + "stats\ncpu\nfrobnicate\n", "",
			[]string{`{"UDP":"127.0.0.1:`, `"Goroutines":`, `"CPU":`, `"Err":"unknown request \"frobnicate\""`}},
		{"relay", []string{"-role", roleRelay, "-allow", "127.0.0.1:1"}, "stats\n", "",
			[]string{`{"URL":"ws://127.0.0.1:`, `"Sessions":0`}},
		{"transport", []string{"-role", roleTransport}, key + "cpu-start\ncpu-stop\n", "",
			[]string{`"UDP":"127.0.0.1:`, `"URL":"ws://127.0.0.1:`, `"Goroutines":`, `"Goroutines":`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errs bytes.Buffer
			err := RunChild(context.Background(), tc.args, strings.NewReader(tc.stdin), &out, &errs)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
			} else {
				require.NoError(t, err, errs.String())
			}
			rest := out.String()
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				require.GreaterOrEqual(t, i, 0, "%q not in %q", w, out.String())
				rest = rest[i+len(w):]
			}
		})
	}
}
