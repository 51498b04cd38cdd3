// Package layer is Cute Framework's client/server layer, the one every
// cf_client_send / cf_server_send message goes through inside the Cute
// Protocol's PAYLOAD packets: the ack system and the reliability transport
// of cute_net.h (cn_ack_system_t, cn_transport_t), as an I/O-free state
// machine on explicit time, one per connection.
//
// A Transport turns messages into datagrams (the 8-byte ack header, the
// 9-byte transport header and up to 1100 bytes of the message) and
// datagrams back into messages: reliable-in-order ones, resent until
// acknowledged, and fire-and-forget ones. Every byte it sends to a Cute
// Framework peer is what cute_net.h would send in its place, and it
// accepts everything cute_net.h sends (the vectors in
// internal/testing/vectortest/testdata/cute/transport are the contract),
// with these differences, each a refusal or a bound where the C code
// overflows, over-reads, hangs, amplifies memory or stalls:
//
//   - A datagram is checked whole before the ack system records it: one
//     that is shorter than both headers, claims more data than it
//     carries, has a fragment index at or past its count, a count of 0, a
//     non-final fragment shorter than 1100 bytes, a message over
//     Config.MaxMessageBytes, or a reliable sequence 1024 or more ahead,
//     is refused and not acknowledged, so the sender resends instead of
//     believing it delivered. Duplicates of delivered data are still
//     acknowledged, as the sender needs.
//   - Memory is bounded by configuration: fragments are stored as they
//     arrive (a datagram claiming 19,065 fragments costs one fragment, not
//     21 MB), and what is buffered for reassembly and for the reader is
//     held under Config.MaxBufferedBytes, plus one message being
//     delivered. A reliable fragment over the bound is refused unacked
//     (the sender resends it later: flow control); a fire-and-forget one
//     evicts incomplete fire-and-forget messages or is dropped.
//   - A reliable message that completes while the reader's queue is full
//     waits in reassembly until the reader makes room (the C code loops
//     for ever).
//   - Sends of 0 bytes are refused (a C receiver can never complete an
//     empty reliable message, and the stream stalls behind it); a
//     fire-and-forget message whose size is a multiple of 1100 is sent
//     whole (the C code drops its last 1100 bytes).
//   - A quiet side still acknowledges: when reliable data arrived and
//     nothing carried the ack back within Config.AckDelay (at once when 8
//     fragments, a quarter of the sender's window, are owed), an ack-only
//     datagram goes out (see sendAckOnly). The C code has none, so its peer
//     resends for ever to a side that only listens.
//   - A peer that keeps sending but never acknowledges is given up on:
//     Update fails with ErrAckTimeout once a fragment was resent at least
//     5 times and the peer was still heard Config.AckTimeout after it was
//     first sent. (A quiet Cute Framework peer cannot acknowledge; the
//     protocol's connection timeout ends a peer that is gone.)
//
// An Update costs the same whatever the ack window: the packet loss and
// bandwidth estimates come out as cn_ack_system_update's to the bit, from
// sums kept as datagrams are sent and acknowledged, where the C code
// passes over 512 sent sequences on every update. So an owner may run
// Update after every Send, as package cute's Conn does to hand a reliable
// message's fragments out at once.
//
// A Transport is not safe for concurrent use: its owner serialises calls.
package layer
