/*
 * cutebench: Cute Framework's networking code (cute_net.h) in an echo
 * benchmark, by the method of cref's cbench, for `sidebyside cute` (see
 * ../doc.go and docs/performance.md).
 *
 * It needs cute_net.h from https://github.com/RandyGaul/cute_framework
 * (libraries/cute/cute_net.h: not ours to copy; it stays in a directory of
 * the user's, named by CUTE_NET_SRC). `sidebyside cute` builds it with the
 * framework's own flags:
 *
 *   cc -O2 -msse4.1 -I$CUTE_NET_SRC -o cutebench cutebench.c
 *
 * Modes: "proto" drives the protocol layer (cn_protocol_server_* and
 * cn_protocol_client_*: PAYLOAD packets, as package cute's bare protocol
 * Conns); "unreliable" and "reliable" drive the client/server layer
 * (cn_server_* and cn_client_*, messages sent fire-and-forget or reliably
 * and in order, as package cute's default Conns).
 *
 * Method: one server and N clients in one process and one thread, on
 * loopback: each pass updates the server, echoes every payload it
 * received, then updates every client and answers each echo with the next
 * payload; a pass that received nothing waits in poll() on the server's
 * and the clients' sockets (at most 10 ms, for the library's timers), as a
 * game loop sleeps, rather than spinning. Each client keeps W payloads in
 * flight. After a 1 s warm-up it measures SECONDS: echoes per second of
 * wall time and per second of the process's CPU (getrusage, user +
 * system), and the p50 and p99 round trip (1 µs buckets up to 1 s). Each
 * payload carries a sequence number and its send time in its first 16
 * bytes.
 *
 * usage: cutebench MODE CLIENTS WINDOW SIZE SECONDS
 * output: one line, as cbench's
 *   result clients=N window=W size=S echoes_per_second=X
 *   echoes_per_cpu_second=Y cpu_seconds=C wall_seconds=T p50_us=P p99_us=Q
 */
#define CUTE_NET_IMPLEMENTATION
#include "cute_net.h"
#include "../cref/measure.h"
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define APPLICATION_ID 0x6e6574636f646531ULL /* as netcode bench */
#define WARMUP_SECONDS 1.0
#define CONNECT_SECONDS 30.0
#define POLL_MS 10

enum mode { PROTO, UNRELIABLE, RELIABLE };
static enum mode mode;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}



/* The server and the clients of either layer, behind one set of calls. */
static cn_protocol_server_t *pserver;
static cn_server_t *server;
static cn_protocol_client_t **pclients;
static cn_client_t **clients;

static void server_update(double dt, uint64_t unix_now) {
    if (mode == PROTO) cn_protocol_server_update(pserver, dt, unix_now);
    else cn_server_update(server, dt, unix_now);
}

/* server_echo sends every payload the server received back to its
   sender; it returns how many, and counts new connections in *connected.
   It fails the run on a disconnection. */
static int server_echo(int *connected) {
    int n = 0;
    if (mode == PROTO) {
        cn_protocol_server_event_t e;
        while (cn_protocol_server_pop_event(pserver, &e)) {
            if (e.type == CN_PROTOCOL_SERVER_EVENT_NEW_CONNECTION) {
                (*connected)++;
            } else if (e.type == CN_PROTOCOL_SERVER_EVENT_DISCONNECTED) {
                fprintf(stderr, "cutebench: a client disconnected\n");
                exit(1);
            } else {
                cn_protocol_server_send_to_client(pserver, e.u.payload_packet.data, e.u.payload_packet.size, e.u.payload_packet.client_index);
                cn_protocol_server_free_packet(pserver, e.u.payload_packet.data);
                n++;
            }
        }
        return n;
    }
    cn_server_event_t e;
    while (cn_server_pop_event(server, &e)) {
        if (e.type == CN_SERVER_EVENT_TYPE_NEW_CONNECTION) {
            (*connected)++;
        } else if (e.type == CN_SERVER_EVENT_TYPE_DISCONNECTED) {
            fprintf(stderr, "cutebench: a client disconnected\n");
            exit(1);
        } else {
            int c = e.u.payload_packet.client_index;
            if (cn_is_error(cn_server_send(server, e.u.payload_packet.data, e.u.payload_packet.size, c, mode == RELIABLE))) {
                fprintf(stderr, "cutebench: cn_server_send failed\n");
                exit(1);
            }
            cn_server_free_packet(server, c, e.u.payload_packet.data);
            n++;
        }
    }
    return n;
}

static void client_update(int i, double dt, uint64_t unix_now) {
    if (mode == PROTO) cn_protocol_client_update(pclients[i], dt, unix_now);
    else cn_client_update(clients[i], dt, unix_now);
}

/* client_state is 1 when client i is connected, 0 while it connects and
   negative when it failed. */
static int client_state(int i) {
    int s = mode == PROTO ? (int)cn_protocol_client_get_state(pclients[i]) : (int)cn_client_state_get(clients[i]);
    if (s < 0) return s;
    return mode == PROTO ? s == CN_PROTOCOL_CLIENT_STATE_CONNECTED : s == CN_CLIENT_STATE_CONNECTED;
}

/* client_receive pops client i's next payload into *p and *size; the
   caller frees it with client_free. */
static int client_receive(int i, void **p, int *size) {
    if (mode == PROTO) {
        uint64_t seq;
        return cn_protocol_client_get_packet(pclients[i], p, size, &seq);
    }
    return cn_client_pop_packet(clients[i], p, size, NULL);
}

static void client_free(int i, void *p) {
    if (mode == PROTO) cn_protocol_client_free_packet(pclients[i], p);
    else cn_client_free_packet(clients[i], p);
}

/* client_send stamps buf with the next sequence number and the time, and
   sends size bytes of it from client i. */
static void client_send(int i, uint8_t *buf, int size, uint64_t *seq, double now) {
    memcpy(buf, seq, 8);
    (*seq)++;
    memcpy(buf + 8, &now, 8);
    cn_result_t r = mode == PROTO ? cn_protocol_client_send(pclients[i], buf, size) : cn_client_send(clients[i], buf, size, mode == RELIABLE);
    if (cn_is_error(r)) {
        fprintf(stderr, "cutebench: client %d: send failed: %s\n", i, r.details ? r.details : "");
        exit(1);
    }
}

static int add_socket(struct pollfd *fds, int nfds, const cn_socket_t *s) {
    fds[nfds].fd = (int)s->handle;
    fds[nfds].events = POLLIN;
    fds[nfds].revents = 0;
    return nfds + 1;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: cutebench proto|unreliable|reliable CLIENTS WINDOW SIZE SECONDS\n");
        return 2;
    }
    if (!strcmp(argv[1], "proto")) mode = PROTO;
    else if (!strcmp(argv[1], "unreliable")) mode = UNRELIABLE;
    else if (!strcmp(argv[1], "reliable")) mode = RELIABLE;
    else {
        fprintf(stderr, "cutebench: mode %s is not proto, unreliable or reliable\n", argv[1]);
        return 2;
    }
    int n = atoi(argv[2]), window = atoi(argv[3]), size = atoi(argv[4]);
    double seconds = atof(argv[5]);
    if (n < 1 || n > CN_PROTOCOL_SERVER_MAX_CLIENTS || window < 1 || size < 16 || size > 1000 || seconds <= 0) {
        fprintf(stderr, "cutebench: want 1..%d clients, a window of 1 or more, 16..1000 bytes and a positive time\n",
                CN_PROTOCOL_SERVER_MAX_CLIENTS);
        return 2;
    }

    cn_crypto_sign_public_t pk;
    cn_crypto_sign_secret_t sk;
    cn_crypto_sign_keygen(&pk, &sk);

    /* The token names the server's port, so it is chosen here, below the
       ephemeral range, and another is tried if it is taken. */
    char addr[64];
    int started = 0;
    srand((unsigned)getpid());
    if (mode == PROTO) {
        pserver = cn_protocol_server_create(APPLICATION_ID, &pk, &sk, NULL);
    } else {
        cn_server_config_t sc = cn_server_config_defaults();
        sc.application_id = APPLICATION_ID;
        sc.public_key = pk;
        sc.secret_key = sk;
        server = cn_server_create(sc);
    }
    for (int try = 0; !started && try < 50; try++) {
        snprintf(addr, sizeof addr, "127.0.0.1:%d", 20000 + rand() % 10000);
        started = !cn_is_error(mode == PROTO ? cn_protocol_server_start(pserver, addr, 10) : cn_server_start(server, addr));
    }
    if (!started) {
        fprintf(stderr, "cutebench: cannot start the server on %s\n", addr);
        return 1;
    }

    pclients = calloc((size_t)n, sizeof *pclients);
    clients = calloc((size_t)n, sizeof *clients);
    const char *endpoints[1] = {addr};
    uint64_t unix_now = (uint64_t)time(NULL);
    for (int i = 0; i < n; i++) {
        uint8_t token[CN_PROTOCOL_CONNECT_TOKEN_SIZE];
        cn_crypto_key_t c2s = cn_crypto_generate_key(), s2c = cn_crypto_generate_key();
        if (cn_is_error(cn_generate_connect_token(APPLICATION_ID, unix_now, &c2s, &s2c, unix_now + 3600, 10, 1, endpoints,
                                                  (uint64_t)i + 1, NULL, &sk, token))) {
            fprintf(stderr, "cutebench: cannot make token %d\n", i);
            return 1;
        }
        int ok;
        if (mode == PROTO) {
            pclients[i] = cn_protocol_client_create(0, APPLICATION_ID, false, NULL);
            ok = pclients[i] && !cn_is_error(cn_protocol_client_connect(pclients[i], token));
        } else {
            clients[i] = cn_client_create(0, APPLICATION_ID, false, NULL);
            ok = clients[i] && !cn_is_error(cn_client_connect(clients[i], token));
        }
        if (!ok) {
            fprintf(stderr, "cutebench: cannot create client %d\n", i);
            return 1;
        }
    }

    /* Connect every client. */
    double t = now_seconds(), last = t, start = t;
    int accepted = 0;
    for (int connected = 0; connected < n || accepted < n;) {
        t = now_seconds();
        unix_now = (uint64_t)time(NULL);
        server_update(t - last, unix_now);
        server_echo(&accepted);
        connected = 0;
        for (int i = 0; i < n; i++) {
            client_update(i, t - last, unix_now);
            int s = client_state(i);
            if (s < 0) {
                fprintf(stderr, "cutebench: client %d failed to connect: state %d\n", i, s);
                return 1;
            }
            connected += s;
        }
        last = t;
        if (t - start > CONNECT_SECONDS) {
            fprintf(stderr, "cutebench: %d of %d clients connected in %.0f s\n", connected, n, CONNECT_SECONDS);
            return 1;
        }
        usleep(1000);
    }

    /* The sockets a pass that received nothing waits on. */
    struct pollfd *fds = calloc((size_t)n + 1, sizeof *fds);
    int nfds = add_socket(fds, 0, mode == PROTO ? &pserver->socket : &server->p_server->socket);
    for (int i = 0; i < n; i++) nfds = add_socket(fds, nfds, mode == PROTO ? &pclients[i]->socket : &clients[i]->p_client->socket);

    /* The exchange: a warm-up, then the measured window. */
    uint8_t buf[1024];
    memset(buf, 0xab, sizeof buf);
    uint64_t seq = 0, echoes = 0;
    t = now_seconds();
    for (int i = 0; i < n; i++)
        for (int w = 0; w < window; w++) client_send(i, buf, size, &seq, t);
    double measure_from = t + WARMUP_SECONDS, end = measure_from + seconds, cpu0 = 0;
    int measuring = 0;
    last = t;
    for (;;) {
        t = now_seconds();
        if (!measuring && t >= measure_from) {
            measuring = 1;
            cpu0 = cpu_seconds();
            echoes = 0;
            memset(hist, 0, sizeof hist);
            measure_from = t;
        }
        if (t >= end) break;
        unix_now = (uint64_t)time(NULL);
        server_update(t - last, unix_now);
        int received = server_echo(&accepted);
        for (int i = 0; i < n; i++) {
            client_update(i, t - last, unix_now);
            void *p;
            int bytes;
            while (client_receive(i, &p, &bytes)) {
                double sent, now = now_seconds();
                memcpy(&sent, (uint8_t *)p + 8, 8);
                client_free(i, p);
                received++;
                if (measuring) {
                    record_rtt(now - sent);
                    echoes++;
                }
                client_send(i, buf, size, &seq, now);
            }
        }
        last = t;
        if (!received) poll(fds, (nfds_t)nfds, POLL_MS);
    }
    double cpu = cpu_seconds() - cpu0, wall = t - measure_from;
    print_result(n, window, size, echoes, wall, cpu);
    return 0;
}
