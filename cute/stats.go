package cute

import "github.com/gonetcode/netcode/internal/sendq"

// Stats are a Listener's counters: gauges of what it holds now, and counts
// since it started (what it refused and why: see docs/security.md). Package
// metrics exports each to Prometheus (metrics.NewCuteCollector) under the
// name given with the field, as it does netcode's ServerStats.
type Stats struct {
	// Connected is the number of clients connected now.
	// Metric: netcode_cute_server_clients.
	Connected int
	// Pending is the number of handshakes in progress now.
	// Metric: netcode_cute_server_pending.
	Pending int
	// MaxClients is the Listener's slot count (ServerConfig.MaxClients).
	// Metric: netcode_cute_server_max_clients.
	MaxClients int

	// PendingFull counts tokens refused because the handshake table was
	// full (ServerConfig.MaxPending).
	// Metric: netcode_cute_server_pending_full_total.
	PendingFull uint64
	// PendingExpired counts handshakes dropped by HalfOpenTimeout, the
	// token's handshake timeout or its expiry.
	// Metric: netcode_cute_server_pending_expired_total.
	PendingExpired uint64
	// TokenInUse counts tokens refused because the same token is
	// handshaking from another address.
	// Metric: netcode_cute_server_token_in_use_total.
	TokenInUse uint64
	// TokenUnanswered counts tokens refused because a handshake with them
	// went unanswered (until they expire).
	// Metric: netcode_cute_server_token_unanswered_total.
	TokenUnanswered uint64
	// HistoryFull counts connections refused because the token history
	// was full.
	// Metric: netcode_cute_server_token_history_full_total.
	HistoryFull uint64
	// TokenReplayed counts tokens refused because they were consumed
	// already.
	// Metric: netcode_cute_server_token_replayed_total.
	TokenReplayed uint64
	// Denied counts CONNECTION_DENIED packets sent: tokens and challenge
	// responses that found every slot taken, or the Listener draining.
	// Metric: netcode_cute_server_denied_sent_total.
	Denied uint64
	// ConnectionsOpened counts connections made (handshakes completed).
	// Metric: netcode_cute_server_connections_opened_total.
	ConnectionsOpened uint64
	// ConnectionsTimedOut counts connections ended because the client
	// fell silent for ServerConfig.ConnectionTimeout.
	// Metric: netcode_cute_server_connections_timed_out_total.
	ConnectionsTimedOut uint64
	// KeepAlivesDropped counts keepalives not sent because the send queue
	// was full (the next one follows within 100 ms).
	// Metric: netcode_cute_server_keepalives_dropped_total.
	KeepAlivesDropped uint64
	// SendErrors counts datagrams the socket refused to send.
	// Metric: netcode_cute_server_send_errors_total.
	SendErrors uint64

	// Draining reports that Drain was called: new clients are denied.
	// Metric: netcode_cute_server_draining (1 while draining).
	Draining bool
	// PacketsReceived and BytesReceived count the datagrams the
	// Listener's socket received and their bytes (UDP payload), valid or
	// not. Metrics: netcode_cute_server_received_packets_total,
	// netcode_cute_server_received_bytes_total.
	PacketsReceived, BytesReceived uint64
	// PacketsSent and BytesSent count the datagrams the socket took to
	// send and their bytes; those it refused are in SendErrors.
	// Metrics: netcode_cute_server_sent_packets_total,
	// netcode_cute_server_sent_bytes_total.
	PacketsSent, BytesSent uint64
}

// Stats returns a snapshot of the server's counters.
func (l *Listener) Stats() Stats {
	s := l.core.Stats()
	var sentPackets, sentBytes uint64
	for _, sh := range l.shards {
		p, b := sh.sq.Sent()
		sentPackets += p
		sentBytes += b
	}
	return Stats{
		Connected:           l.core.ClientCount(),
		Pending:             l.core.PendingCount(),
		MaxClients:          l.max,
		PendingFull:         s.PendingFull,
		PendingExpired:      s.PendingExpired,
		TokenInUse:          s.TokenInUse,
		TokenUnanswered:     s.TokenUnanswered,
		HistoryFull:         s.HistoryFull,
		TokenReplayed:       s.TokenReplayed,
		Denied:              s.Denied,
		ConnectionsOpened:   s.ConnectionsOpened,
		ConnectionsTimedOut: s.ConnectionsTimedOut,
		KeepAlivesDropped:   l.sendCount((*sendq.Queue).Dropped),
		SendErrors:          l.sendCount((*sendq.Queue).Refused),
		Draining:            l.core.Draining(),
		PacketsReceived:     l.received.Packets(),
		BytesReceived:       l.received.Bytes(),
		PacketsSent:         sentPackets,
		BytesSent:           sentBytes,
	}
}
