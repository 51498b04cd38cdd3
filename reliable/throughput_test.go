package reliable

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/stretchr/testify/require"
)

// peerEnv names the environment variable that makes TestStreamPeer the
// server process of BenchmarkStreamThroughput: "recv" reads a stream to
// its end, "send N" writes N bytes.
const peerEnv = "RELIABLE_STREAM_PEER"

// cpuTime returns the process's user and system CPU time so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	require.NoError(tb, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sendStream writes n bytes to s in 1 MiB Writes and closes it, which
// returns once the peer acknowledged everything.
func sendStream(tb testing.TB, s *Stream, n int64) {
	buf := make([]byte, goodputChunk)
	pattern(buf, 1)
	for ; n > 0; n -= goodputChunk {
		if _, err := s.Write(buf[:min(n, goodputChunk)]); err != nil {
			tb.Fatal(err)
		}
	}
	require.NoError(tb, s.Close())
}

// recvStream reads s to its end and returns how many bytes it read, and
// the CPU time and wall time from the first byte.
func recvStream(tb testing.TB, s *Stream) (int64, time.Duration, time.Duration) {
	buf := make([]byte, 64<<10)
	n, err := s.Read(buf) // the first bytes: the transfer starts
	require.NoError(tb, err)
	start, cpu0 := time.Now(), cpuTime(tb)
	m, err := io.CopyBuffer(io.Discard, s, buf)
	require.NoError(tb, err)
	return int64(n) + m, cpuTime(tb) - cpu0, time.Since(start)
}

// TestStreamPeer is the server process of BenchmarkStreamThroughput,
// which starts this test binary again with peerEnv set; otherwise it does
// nothing. It listens on UDP loopback, prints its address, accepts one
// Stream, reads it to its end or writes to it, and prints the CPU time
// that took and the packets it sent.
func TestStreamPeer(t *testing.T) {
	role := strings.Fields(os.Getenv(peerEnv))
	if len(role) == 0 {
		t.Skip("the server process of BenchmarkStreamThroughput; runs only when started by it")
	}
	l, err := netcode.Listen("udp4", "127.0.0.1:0", serverConfig())
	require.NoError(t, err)
	defer l.Close()
	fmt.Printf("addr %s\n", l.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := l.AcceptConn(ctx)
	require.NoError(t, err)
	s, err := NewStream(nc, nil)
	require.NoError(t, err)
	var n int64
	var cpu time.Duration
	if role[0] == "send" {
		n, err = strconv.ParseInt(role[1], 10, 64)
		require.NoError(t, err)
		cpu0 := cpuTime(t)
		sendStream(t, s, n)
		cpu = cpuTime(t) - cpu0
	} else {
		n, cpu, _ = recvStream(t, s)
		require.NoError(t, s.Close())
	}
	fmt.Printf("done %d cpu %d packets %d\n", n, cpu.Nanoseconds(), s.Stats().Endpoint.PacketsSent)
}

// BenchmarkStreamThroughput measures one Stream with default settings
// over netcode on UDP loopback, with the server in a process of its own
// (this test binary again, as TestStreamPeer), so that each side's CPU
// time is its own: MB/s of goodput, and the sender's and the receiver's
// CPU seconds per GB (from getrusage), the figures a loaded machine moves
// least; and the data packets, acks and resends per MiB. In upload the
// dialing client sends; in download the server does. Each iteration
// moves 1 MiB: -benchtime 256x moves 256 MiB. -cpuprofile profiles the
// client; RELIABLE_STREAM_PEER_CPUPROFILE=file the server.
func BenchmarkStreamThroughput(b *testing.B) {
	for _, upload := range []bool{true, false} {
		name := map[bool]string{true: "upload", false: "download"}[upload]
		b.Run(name, func(b *testing.B) { benchThroughput(b, upload) })
	}
}

func benchThroughput(b *testing.B, upload bool) {
	total := int64(b.N) * goodputChunk
	role := "recv"
	if !upload {
		role = "send " + strconv.FormatInt(total, 10)
	}
	args := []string{"-test.run=^TestStreamPeer$", "-test.count=1"}
	if prof := os.Getenv(peerEnv + "_CPUPROFILE"); prof != "" {
		args = append(args, "-test.cpuprofile="+prof)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), peerEnv+"="+role)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(b, err)
	require.NoError(b, cmd.Start())
	defer func() {
		_ = cmd.Process.Kill() // after a failure; harmless once it exited
		_ = cmd.Wait()
	}()
	lines := bufio.NewScanner(out)
	line := func(key string) []string {
		for lines.Scan() {
			if f := strings.Fields(lines.Text()); len(f) >= 2 && f[0] == key {
				return f
			}
		}
		b.Fatalf("server process printed no %q line", key)
		return nil
	}
	addr := netip.MustParseAddrPort(line("addr")[1])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := netcode.DialContext(ctx, mint(b, addr))
	require.NoError(b, err)
	s, err := NewStream(nc, nil)
	require.NoError(b, err)

	b.SetBytes(goodputChunk)
	b.ReportAllocs()
	b.ResetTimer()
	var cpu, wall time.Duration
	var got int64
	if upload {
		start, cpu0 := time.Now(), cpuTime(b)
		sendStream(b, s, total)
		cpu, wall = cpuTime(b)-cpu0, time.Since(start)
	} else {
		got, cpu, wall = recvStream(b, s)
		require.NoError(b, s.Close())
	}
	b.StopTimer()
	st := s.Stats()

	f := line("done")
	peerBytes, _ := strconv.ParseInt(f[1], 10, 64)
	peerCPU, _ := strconv.ParseInt(f[3], 10, 64)
	peerPackets, _ := strconv.ParseInt(f[5], 10, 64)
	_, _ = io.Copy(io.Discard, out) // let it finish: write its profile, exit
	sendCPU, recvCPU := cpu, time.Duration(peerCPU)
	data, acks := float64(st.Endpoint.PacketsSent), float64(peerPackets)
	if upload {
		got = peerBytes
	} else {
		sendCPU, recvCPU = recvCPU, sendCPU
		data, acks = acks, data
	}
	require.Equal(b, total, got, "bytes received")
	gb, mib := float64(total)/1e9, float64(total)/(1<<20)
	b.ReportMetric(float64(total)/wall.Seconds()/1e6, "MB/s")
	b.ReportMetric(sendCPU.Seconds()/gb, "send-CPU-s/GB")
	b.ReportMetric(recvCPU.Seconds()/gb, "recv-CPU-s/GB")
	b.ReportMetric(data/mib, "pkts/MiB")
	b.ReportMetric(acks/mib, "acks/MiB")
	if upload {
		b.ReportMetric(float64(st.Resent)/mib, "resent/MiB")
	}
	b.ReportMetric(0, "ns/op")
}
