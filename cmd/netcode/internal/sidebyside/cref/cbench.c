/*
 * cbench: the C reference's echo benchmark, by the method of `netcode bench`
 * flat out, for `sidebyside cref` (see ../doc.go and the README's
 * Performance section).
 *
 * It needs netcode.c and netcode.h of protocol 1.02 from
 * https://github.com/mas-bandwidth/netcode (not ours to copy: they stay in a
 * directory of the user's, named by NETCODE_C_SRC) and libsodium
 * (Debian: libsodium-dev). `sidebyside cref` builds it as
 *
 *   cc -O2 -DNDEBUG -I$NETCODE_C_SRC -o cbench cbench.c -lsodium
 *
 * (cbench.c includes netcode.c, for its sockets: see harness.h).
 *
 * Method: one netcode server and N clients in one process and one thread,
 * on loopback, as the C library is meant to be driven: each pass updates
 * the server and every client (each update reads its socket), echoes what
 * the server received and answers what the clients received; a pass that
 * received nothing waits in poll() on the server's and the clients'
 * sockets (at most 10 ms, for the library's timers), as a game loop
 * sleeps, rather than spinning. Each client keeps W payloads in flight and
 * sends the next when an echo comes back; the server echoes every payload.
 * After a 1 s
 * warm-up it measures SECONDS: echoes per second of wall time and per
 * second of the process's CPU (getrusage, user + system), and the p50 and
 * p99 round trip (1 µs buckets up to 1 s). Each payload carries a sequence
 * number and its send time (netcode_time) in its first 16 bytes.
 *
 * usage: cbench CLIENTS WINDOW SIZE SECONDS [PORT]
 * output: one line
 *   result clients=N window=W size=S echoes_per_second=X
 *   echoes_per_cpu_second=Y cpu_seconds=C wall_seconds=T p50_us=P p99_us=Q
 */
#include "netcode.c"
#include "harness.h"
#include "measure.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROTOCOL_ID 0x6e6574636f646531ULL /* "netcode1", as netcode bench */
#define WARMUP_SECONDS 1.0
#define CONNECT_SECONDS 30.0



/* send_payload stamps buf with the next sequence number and the time, and
   sends size bytes of it from client. */
static void send_payload(struct netcode_client_t *client, uint8_t *buf, int size, uint64_t *seq, double now) {
    memcpy(buf, seq, 8);
    (*seq)++;
    memcpy(buf + 8, &now, 8);
    netcode_client_send_packet(client, buf, size);
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: cbench CLIENTS WINDOW SIZE SECONDS [PORT]\n");
        return 2;
    }
    int n = atoi(argv[1]), window = atoi(argv[2]), size = atoi(argv[3]);
    double seconds = atof(argv[4]);
    int port = argc > 5 ? atoi(argv[5]) : 0;
    if (n < 1 || n > NETCODE_MAX_CLIENTS || window < 1 || size < 16 || size > NETCODE_MAX_PACKET_SIZE || seconds <= 0) {
        fprintf(stderr, "cbench: want 1..%d clients, a window of 1 or more, 16..%d bytes and a positive time\n",
                NETCODE_MAX_CLIENTS, NETCODE_MAX_PACKET_SIZE);
        return 2;
    }
    if (netcode_init() != NETCODE_OK) {
        fprintf(stderr, "cbench: netcode_init failed\n");
        return 1;
    }
    netcode_log_level(getenv("CBENCH_LOG") ? NETCODE_LOG_LEVEL_DEBUG : NETCODE_LOG_LEVEL_NONE);

    uint8_t key[NETCODE_KEY_BYTES];
    netcode_random_bytes(key, NETCODE_KEY_BYTES);
    double t = netcode_time(), start;
    struct netcode_server_config_t sc;
    netcode_default_server_config(&sc);
    sc.protocol_id = PROTOCOL_ID;
    memcpy(sc.private_key, key, NETCODE_KEY_BYTES);

    /* The token names the server's port, so it is chosen here, below the
       ephemeral range, and another is tried if it is taken. */
    char addr[64];
    struct netcode_server_t *server = NULL;
    srand((unsigned)getpid());
    for (int try = 0; !server && try < 50; try++) {
        snprintf(addr, sizeof addr, "127.0.0.1:%d", port ? port : 20000 + rand() % 10000);
        server = netcode_server_create(addr, &sc, t);
    }
    if (!server) {
        fprintf(stderr, "cbench: cannot create the server on %s\n", addr);
        return 1;
    }
    netcode_server_start(server, n);

    struct netcode_client_t **clients = calloc((size_t)n, sizeof *clients);
    struct netcode_client_config_t cc;
    netcode_default_client_config(&cc);
    const char *servers[1] = {addr};
    uint8_t user_data[NETCODE_USER_DATA_BYTES] = {0};
    for (int i = 0; i < n; i++) {
        uint8_t token[NETCODE_CONNECT_TOKEN_BYTES];
        clients[i] = netcode_client_create("0.0.0.0", &cc, t);
        if (!clients[i] ||
            netcode_generate_connect_token(1, servers, servers, 3600, 10, (uint64_t)i + 1, PROTOCOL_ID, key, user_data, token) != NETCODE_OK) {
            fprintf(stderr, "cbench: cannot create client %d\n", i);
            return 1;
        }
        netcode_client_connect(clients[i], token);
    }

    /* Connect every client. */
    start = t;
    for (int connected = 0; connected < n;) {
        t = netcode_time();
        netcode_server_update(server, t);
        connected = 0;
        for (int i = 0; i < n; i++) {
            netcode_client_update(clients[i], t);
            int state = netcode_client_state(clients[i]);
            if (state < 0) {
                fprintf(stderr, "cbench: client %d failed to connect: state %d\n", i, state);
                return 1;
            }
            connected += state == NETCODE_CLIENT_STATE_CONNECTED;
        }
        if (t - start > CONNECT_SECONDS) {
            fprintf(stderr, "cbench: %d of %d clients connected in %.0f s\n", connected, n, CONNECT_SECONDS);
            return 1;
        }
    }

    /* The sockets a pass that received nothing waits on. */
    struct pollfd *fds = calloc((size_t)(2 * n + 2), sizeof *fds);
    int nfds = add_holder(fds, 0, &server->socket_holder);
    for (int i = 0; i < n; i++) nfds = add_holder(fds, nfds, &clients[i]->socket_holder);

    /* The exchange: a warm-up, then the measured window. */
    uint8_t buf[NETCODE_MAX_PACKET_SIZE];
    memset(buf, 0xab, sizeof buf);
    uint64_t seq = 0, echoes = 0;
    t = netcode_time();
    for (int i = 0; i < n; i++)
        for (int w = 0; w < window; w++) send_payload(clients[i], buf, size, &seq, t);
    double measure_from = t + WARMUP_SECONDS, end = measure_from + seconds, cpu0 = 0;
    int measuring = 0;
    for (;;) {
        t = netcode_time();
        if (!measuring && t >= measure_from) {
            measuring = 1;
            cpu0 = cpu_seconds();
            echoes = 0;
            memset(hist, 0, sizeof hist);
            measure_from = t;
        }
        if (t >= end) break;
        netcode_server_update(server, t);
        int received = echo_received(server, n);
        for (int i = 0; i < n; i++) {
            netcode_client_update(clients[i], t);
            int bytes;
            uint64_t sequence;
            uint8_t *p;
            while ((p = netcode_client_receive_packet(clients[i], &bytes, &sequence)) != NULL) {
                double sent, now = netcode_time();
                memcpy(&sent, p + 8, 8);
                netcode_client_free_packet(clients[i], p);
                received++;
                if (measuring) {
                    record_rtt(now - sent);
                    echoes++;
                }
                send_payload(clients[i], buf, size, &seq, now);
            }
        }
        if (!received) poll(fds, (nfds_t)nfds, POLL_MS);
    }
    double cpu = cpu_seconds() - cpu0, wall = t - measure_from;
    print_result(n, window, size, echoes, wall, cpu);

    for (int i = 0; i < n; i++) netcode_client_destroy(clients[i]);
    free(clients);
    free(fds);
    netcode_server_destroy(server);
    netcode_term();
    return 0;
}
