package netcode

// Stats returns a snapshot of the server's counters.
func (l *Listener) Stats() ServerStats {
	s := l.core.Stats()
	var dropped, refused uint64
	var sent traffic
	for _, q := range l.sends {
		dropped += q.Dropped()
		refused += q.Refused()
		p, b := q.Sent()
		sent.Add(int(p), int(b))
	}
	return ServerStats{
		Connected:          s.Connected,
		Mappings:           s.Mappings,
		MappingsLimit:      s.MappingsLimit,
		History:            s.History,
		HistoryLimit:       s.HistoryLimit,
		Ignored:            s.Ignored,
		Replayed:           s.Replayed,
		ChallengesSent:     s.ChallengesSent,
		DeniedSent:         s.DeniedSent,
		TokenReuseRefused:  s.TokenReuseRefused,
		AddressNotInToken:  s.AddressNotInToken,
		HistoryFull:        s.HistoryFull,
		MappingsFull:       s.MappingsFull,
		ConnectionsOpened:  s.ConnectionsOpened,
		ConnectionsTimeout: s.ConnectionsTimeout,
		PayloadsDropped:    s.PayloadsDropped,
		KeepAlivesDropped:  dropped,
		SendErrors:         refused,
		Draining:           l.draining.Load(),
		PacketsReceived:    l.received.Packets(),
		BytesReceived:      l.received.Bytes(),
		PacketsSent:        sent.Packets(),
		BytesSent:          sent.Bytes(),
	}
}

// ServerStats are a Listener's counters: gauges of what it holds now, and
// counts since it started. Package metrics exports each to Prometheus
// under the name given with the field. Each received datagram that is not a valid
// packet for its state is counted once, under the first reason that
// refused it.
type ServerStats struct {
	// Connected is the number of clients connected now (loopback clients
	// included).
	// Metric: netcode_server_clients.
	Connected int
	// Mappings is the number of encryption mappings held now: one for each
	// handshake in progress and each connection.
	// Metric: netcode_server_mappings.
	Mappings int
	// MappingsLimit is the most encryption mappings held at once (4 per
	// client slot); a request that needs one more drops the oldest
	// handshake in progress and counts in MappingsFull.
	// Metric: netcode_server_mappings_limit.
	MappingsLimit int
	// History is the number of connect tokens remembered now: each token
	// a connection was made with, until it expires.
	// Metric: netcode_server_token_history.
	History int
	// HistoryLimit is the most connect tokens remembered at once
	// (ServerConfig.TokenRate × TokenExpiry); a new token past it counts
	// in HistoryFull.
	// Metric: netcode_server_token_history_limit.
	HistoryLimit int

	// Ignored counts datagrams dropped as malformed, unauthenticated or
	// out of place for their sender's state.
	// Metric: netcode_server_ignored_packets_total.
	Ignored uint64
	// Replayed counts datagrams dropped by replay protection.
	// Metric: netcode_server_replayed_packets_total.
	Replayed uint64
	// ChallengesSent counts connection challenges sent: handshakes begun.
	// Metric: netcode_server_challenges_sent_total.
	ChallengesSent uint64
	// DeniedSent counts connection-denied packets sent: requests and
	// responses that found every slot taken.
	// Metric: netcode_server_denied_sent_total.
	DeniedSent uint64
	// TokenReuseRefused counts requests refused because their token was
	// used from another address, or was already connected with.
	// Metric: netcode_server_token_reuse_refused_total.
	TokenReuseRefused uint64
	// AddressNotInToken counts requests refused because the token names
	// other servers.
	// Metric: netcode_server_address_not_in_token_total.
	AddressNotInToken uint64
	// HistoryFull counts requests with a new token refused because the
	// token history was full.
	// Metric: netcode_server_token_history_full_total.
	HistoryFull uint64
	// MappingsFull counts requests that found the encryption mapping
	// table full, each of which dropped the oldest handshake in progress
	// to make room.
	// Metric: netcode_server_mappings_full_total.
	MappingsFull uint64
	// ConnectionsOpened counts connections made (handshakes completed and
	// loopback clients).
	// Metric: netcode_server_connections_opened_total.
	ConnectionsOpened uint64
	// ConnectionsTimeout counts connections ended because the client fell
	// silent for its token's timeout.
	// Metric: netcode_server_connections_timed_out_total.
	ConnectionsTimeout uint64
	// PayloadsDropped counts received payloads dropped because their
	// connection's read queue was full (the sum of every Conn.Dropped).
	// Metric: netcode_server_payloads_dropped_total.
	PayloadsDropped uint64
	// KeepAlivesDropped counts keep-alives not sent because the send queue
	// was full (the next one follows within 100 ms).
	// Metric: netcode_server_keepalives_dropped_total.
	KeepAlivesDropped uint64
	// SendErrors counts datagrams the socket refused to send.
	// Metric: netcode_server_send_errors_total.
	SendErrors uint64

	// Draining reports that Drain was called: connection requests are
	// denied. Metric: netcode_server_draining (1 while draining).
	Draining bool
	// PacketsReceived and BytesReceived count the datagrams the server's
	// sockets received and their bytes (UDP payload), valid or not.
	// Metrics: netcode_server_received_packets_total,
	// netcode_server_received_bytes_total.
	PacketsReceived, BytesReceived uint64
	// PacketsSent and BytesSent count the datagrams the server's socket
	// took to send and their bytes; those it refused are in SendErrors.
	// Metrics: netcode_server_sent_packets_total,
	// netcode_server_sent_bytes_total.
	PacketsSent, BytesSent uint64
}
