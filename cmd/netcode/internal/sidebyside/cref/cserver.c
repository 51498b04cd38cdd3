/*
 * cserver: the C reference's echo server in a process of its own, for
 * `sidebyside cref -server-only` (see ../doc.go): the same Go clients load
 * it and then a netcode.Listen echo server, and the parent reads each
 * server's CPU time from /proc.
 *
 * It needs what cbench.c needs (netcode.c and netcode.h 1.02 from the
 * directory NETCODE_C_SRC names, and libsodium); `sidebyside cref` builds
 * it as
 *
 *   cc -O2 -DNDEBUG -I$NETCODE_C_SRC -o cserver cserver.c -lsodium
 *
 * It speaks the line protocol of sidebyside's server processes (child.go):
 * it reads the private key (hex) as the first line of its stdin, serves
 * on 127.0.0.1 and prints "ready ADDRESS", and exits when its stdin
 * closes. The loop is a game server's: update the server (which reads its
 * socket), echo every payload received, and when a pass received nothing,
 * wait in poll() on the server's socket and stdin (at most 10 ms, for the
 * library's timers).
 *
 * usage: cserver child KIND MAX_CLIENTS   (KIND is ignored: "c")
 */
#include "netcode.c"
#include "harness.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROTOCOL_ID 0x6e6574636f646531ULL /* "netcode1", as sidebyside's tokens */

/* read_key parses the first line of stdin, the key in hex. */
static int read_key(uint8_t key[NETCODE_KEY_BYTES]) {
    char line[2 * NETCODE_KEY_BYTES + 8];
    if (!fgets(line, sizeof line, stdin)) return 0;
    for (int i = 0; i < NETCODE_KEY_BYTES; i++) {
        unsigned v;
        if (sscanf(line + 2 * i, "%2x", &v) != 1) return 0;
        key[i] = (uint8_t)v;
    }
    return 1;
}

int main(int argc, char **argv) {
    int max = argc > 3 ? atoi(argv[3]) : 0;
    if (max < 1 || max > NETCODE_MAX_CLIENTS) {
        fprintf(stderr, "usage: cserver child KIND MAX_CLIENTS (1..%d)\n", NETCODE_MAX_CLIENTS);
        return 2;
    }
    struct netcode_server_config_t sc;
    netcode_default_server_config(&sc);
    sc.protocol_id = PROTOCOL_ID;
    if (!read_key(sc.private_key)) {
        fprintf(stderr, "cserver: no key line (%d bytes in hex) on stdin\n", NETCODE_KEY_BYTES);
        return 2;
    }
    if (netcode_init() != NETCODE_OK) {
        fprintf(stderr, "cserver: netcode_init failed\n");
        return 1;
    }
    netcode_log_level(getenv("CBENCH_LOG") ? NETCODE_LOG_LEVEL_DEBUG : NETCODE_LOG_LEVEL_NONE);

    /* The tokens name the server's port, so it is chosen here, below the
       ephemeral range, and another is tried if it is taken. */
    char addr[64];
    struct netcode_server_t *server = NULL;
    double t = netcode_time();
    srand((unsigned)getpid());
    for (int try = 0; !server && try < 50; try++) {
        snprintf(addr, sizeof addr, "127.0.0.1:%d", 20000 + rand() % 10000);
        server = netcode_server_create(addr, &sc, t);
    }
    if (!server) {
        fprintf(stderr, "cserver: cannot create the server\n");
        return 1;
    }
    netcode_server_start(server, max);
    printf("ready %s\n", addr);
    fflush(stdout);

    struct pollfd fds[3];
    int nfds = add_holder(fds, 0, &server->socket_holder);
    fds[nfds].fd = STDIN_FILENO;
    fds[nfds].events = POLLIN;
    int in = nfds++;
    for (;;) {
        netcode_server_update(server, netcode_time());
        if (echo_received(server, max)) continue;
        fds[in].revents = 0;
        if (poll(fds, (nfds_t)nfds, POLL_MS) > 0 && fds[in].revents) {
            char buf[256];
            if (read(STDIN_FILENO, buf, sizeof buf) <= 0) break; /* stdin closed: the end */
        }
    }
    netcode_server_destroy(server);
    netcode_term();
    return 0;
}
