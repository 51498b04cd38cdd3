/*
 * harness.h: what cbench.c and cserver.c share: the server's echo, and
 * waiting in poll() on the C reference's sockets. Both include netcode.c itself (from NETCODE_C_SRC, at
 * build time) so that they can reach the sockets netcode.c keeps in its
 * socket holders: the C library has no call that hands them out, and a game
 * loop built on it sleeps on them (poll, epoll, select) rather than spins.
 */
#ifndef SIDEBYSIDE_HARNESS_H
#define SIDEBYSIDE_HARNESS_H

#include <poll.h>

/* add_holder appends the open sockets of holder (its IPv4 and IPv6 ones)
   to fds and returns the new count. */
static int add_holder(struct pollfd *fds, int nfds, const struct netcode_socket_holder_t *holder) {
    const struct netcode_socket_t *s[2] = {&holder->ipv4, &holder->ipv6};
    for (int i = 0; i < 2; i++) {
        if (s[i]->handle == 0) continue;
        fds[nfds].fd = (int)s[i]->handle;
        fds[nfds].events = POLLIN;
        fds[nfds].revents = 0;
        nfds++;
    }
    return nfds;
}

/* echo_received sends every payload the server received from its first
   max clients back to its sender, and returns how many. */
static int echo_received(struct netcode_server_t *server, int max) {
    int n = 0;
    for (int c = 0; c < max; c++) {
        int bytes;
        uint64_t sequence;
        uint8_t *p;
        while ((p = netcode_server_receive_packet(server, c, &bytes, &sequence)) != NULL) {
            netcode_server_send_packet(server, c, p, bytes);
            netcode_server_free_packet(server, p);
            n++;
        }
    }
    return n;
}

/* POLL_MS bounds a wait, so that the library's timers (keep-alives every
   0.1 s, time-outs) still run on time when nothing arrives. */
#define POLL_MS 10

#endif
