// Command sidebyside runs the side-by-side comparisons of
// docs/performance.md: this library against quic-go, plain UDP, TCP and
// the C reference, on loopback, interleaved and in the same run. It is a
// module of its own so that the netcode module never depends on what it
// compares against (quic-go's streams and DATAGRAM frames here; the C
// reference is built from a source tree the user names). One command per
// table:
//
//	cd cmd/netcode/internal/sidebyside
//	go run . datagrams              # quic-go DATAGRAM vs netcode vs plain UDP echoes
//	go run . streams                # reliable.Stream vs quic-go stream vs TCP, 256 MiB
//	NETCODE_C_SRC=dir go run . cref # the C reference vs netcode bench, one process each
//	NETCODE_C_SRC=dir go run . cref -server-only # the servers alone, under the same Go clients
//	NETCODE_C_SRC=dir go run . cref -api # and the public-API client harness, one process
//	NETCODE_C_SRC=dir go run . cref -api-floor # and its shape on raw UDP, and GOMAXPROCS=1
//	CUTE_NET_SRC=dir go run . cute  # Cute Framework's cute_net.h vs package cute
//	CUTE_NET_SRC=dir go run . cute -floor -configs 1x1x100 # and the raw UDP floor at window 1
//	NETCODE_C_SRC=dir go run . tables -before REV -after HEAD # the README's tables, before and after
//
// # Method
//
// datagrams runs an echo server in a child process (this executable again),
// so that its CPU time is its own, as `netcode bench -server-process` does,
// and N clients in this process, each keeping W payloads in flight and
// sending the next when an echo returns (flat out). Every transport is
// driven the same way: one reader goroutine per client, one echo goroutine
// per connection on the server (plain UDP: GOMAXPROCS goroutines on one
// socket). After a warm-up it measures a window: echoes per second, echoes
// per second of the server process's CPU (getrusage in the child), echoes
// per second of the CPU of both processes, and the p50 and p99 round trip.
//
// streams moves one stream of -mib MiB over loopback in each direction,
// each end in a process of its own (this executable again): upload (the
// dialing end sends) and download (the listening end sends). Each
// transport keeps its defaults (reliable.NewStream(conn, nil), an empty
// quic.Config). The sender writes 1 MiB at a time and ends its write side;
// the receiver reads to the end and answers one byte, which ends the
// sender's measurement. MB/s is the bytes over the receiver's time from its
// first byte to the end; each side's CPU seconds per GB is its own
// process's CPU (getrusage) over the transfer.
//
// With -base DIR, datagrams also runs the netcode echo server, and streams
// reliable.Stream's two ends, built against the netcode module of another
// worktree (a copy of this module with its replace pointed there), as one
// more transport interleaved with the others: a before and after in the
// same run.
//
// cref builds the C reference echo harness (cref/cbench.c) and echo
// server (cref/cserver.c), each compiled with netcode.c and netcode.h 1.02
// from the directory NETCODE_C_SRC names, which this repository does not
// hold, and libsodium (they include netcode.c to reach the sockets it
// keeps, see cref/harness.h), and cmd/netcode of a worktree of this
// repository (-worktree; default the one this module is in). It runs
// cbench and `netcode bench -json` at the same client counts, windows and
// payloads, C and Go interleaved. Both run the server and the clients in
// one process, the shape the single-threaded C library is driven in:
// echoes per CPU-second of that process, and the p50 and p99 round trip.
// cbench's loop updates the server and every client, echoes and answers
// what they received, and waits in poll() on all their sockets (at most
// 10 ms, for the library's timers) when a pass received nothing, as a game
// loop sleeps; it does not spin. Without NETCODE_C_SRC it says so and
// gives the Go column alone; the C reference has no figure above its 256
// clients. With -floor it also runs, at each one-client window-1
// configuration, a bare Go UDP ping-pong (this executable again: one
// server and one client goroutine on net.UDPConn in one process, datagrams
// of the size netcode's would be, no protocol), interleaved with the
// others: what Go's runtime poller alone costs an echo there, which no
// library on it pays less than.
//
// cref -server-only measures the servers alone: the clients of datagrams
// (dialed netcode.Conns in this process, a reader goroutine per client
// that sends the next payload on each echo) load the C reference's echo
// server (cserver: update, echo, and poll() on its socket and stdin when a
// pass received nothing, in a process of its own) and then netcode's
// (netcode.Listen and a goroutine per connection reading and writing, in
// a process of its own, built from the netcode module this module
// replaces), in an order that rotates from round to round. Each server's
// CPU time over the window comes from /proc/PID/stat, read by this
// process: server µs per echo, and Go/C per CPU-second (C's µs over Go's).
//
// cref -api also runs, interleaved with cbench and netcode bench, the
// public-API harness (apiecho.go, this executable again): netcode as a
// newcomer drives it, in one process: serveDatagrams' netcode.Listen echo
// server (a goroutine per connection) and per client a dialed
// netcode.Conn with a reader goroutine, which hands a credit per echo to
// the client's writer goroutine over a channel, and the writer, which
// Writes the next payload. netcode bench writes from the reader itself,
// so its Writes are held for a train; a writer goroutine's are not.
// -api-cpuprofile writes each run's CPU profile.
//
// cref -api-floor (which implies -api) measures, in the same rounds, how
// much of the public-API harness's cost is netcode's and how much is the
// Go runtime's with that goroutine shape. It runs the harness again with
// GOMAXPROCS=1 (one thread runs Go code, so readying the writer wakes no
// idle thread), and the same shape on raw UDP (apiecho -transport udp):
// per client a connected net.UDPConn with the same reader and writer
// goroutines and credit channel, datagrams of the size netcode's would
// be, and an echo server of one goroutine on one socket
// (ReadFromUDPAddrPort, WriteToUDPAddrPort), with the runtime's
// GOMAXPROCS and with 1. Its table gives each one's echoes per
// CPU-second, its ratio to C, netcode over raw UDP at each GOMAXPROCS,
// and CPU µs per echo:
//
//	NETCODE_C_SRC=dir go run . cref -api-floor -configs 1x1x100,1x8x100
//
// cute builds cuteref/cutebench.c against cute_net.h from the directory
// CUTE_NET_SRC names (libraries/cute of github.com/RandyGaul/cute_framework,
// which this repository does not hold) with the framework's own flags,
// -O2 -msse4.1: cbench's method (one process, one thread, a poll() loop)
// on Cute Framework's protocol layer (cn_protocol_*, mode proto) or its
// client/server layer with fire-and-forget or reliable messages
// (cn_client_* and cn_server_*, modes unreliable and reliable). The Go
// side of mode proto is `netcode bench -dialect cute` (bare protocol
// Conns; its netcode phase is reported beside it); of the layer's modes,
// which the bench cannot drive, cuteecho.go (this executable again):
// package cute's default Conns, a cute.Listen echo server with a
// goroutine per connection and per client a reader goroutine that Sends
// the next payload on each echo, as the bench drives bare Conns. C and Go
// alternate, in an order that changes from run to run.
//
// cute -floor does for package cute at window 1 what cref -api-floor does
// for the public API: at each one-client window-1 configuration it also
// runs, interleaved, package cute's harness (cuteecho, in mode proto too,
// where the main table's Go figure is the bench's) with GOMAXPROCS=1, and
// the raw UDP floor of that shape, the ping-pong of cref -floor (one
// client goroutine writing then reading, one server goroutine), with the
// runtime's GOMAXPROCS and with 1. Its table gives each one's echoes per
// CPU-second, its ratio to Cute Framework and CPU µs per echo: whether
// the gap at window 1 is the runtime's, the crypto's or the library's.
//
// tables reruns every figure of the README's Performance tables for two
// revisions of this repository (-before, -after; default HEAD) in one
// run. Each revision is checked out (git archive, so nothing is written
// to the repository) into a temporary directory, where its cmd/netcode
// and its own sidebyside are built. Each round runs every README row for
// both revisions, one after the other, before first in odd rounds and
// after first in even ones: the three `netcode bench` rows (its -json
// output, read by parseBenchJSON; the first, -rounds 3 in the README,
// runs -rounds 1 in each round) and cref -server-only's four
// configurations, where the clients of this process load the C
// reference's server and each revision's netcode echo server (that
// revision's `sidebyside child netcode`), in an order that rotates by
// round. It prints one markdown table: each figure by round and as
// medians, before and after, after/before, which way is better, whether
// the rounds' ranges overlap, the commits, the date and the load at the
// start and end. A run that fails prints the rounds so far and why. With the
// defaults (3 rounds) it takes about 10 minutes; -quick runs one round of
// short windows, a trial of about 2 minutes; -rows picks rows.
//
// Every command repeats each configuration -rounds times, interleaving the
// transports within each round (their order rotates from round to round),
// and reports medians, with the rounds' values and the machine's load
// average (uptime) before and after. Nothing here is a timed test: the
// figures are printed, never asserted.
package main
