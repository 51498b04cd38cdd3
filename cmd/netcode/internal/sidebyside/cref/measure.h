/*
 * measure.h: what the C harnesses (cref/cbench.c, cuteref/cutebench.c)
 * share: the process's CPU time, the round trips' histogram (1 µs buckets
 * up to 1 s) and the result line `sidebyside` reads (parseCbench).
 */
#ifndef SIDEBYSIDE_MEASURE_H
#define SIDEBYSIDE_MEASURE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#define HIST_BUCKETS 1000000 /* 1 µs each, up to 1 s */

static uint32_t hist[HIST_BUCKETS];

/* cpu_seconds is the process's user plus system CPU time so far. */
static double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* record_rtt counts a round trip of the given seconds. */
static void record_rtt(double seconds) {
    long us = (long)(seconds * 1e6);
    hist[us < 0 ? 0 : us >= HIST_BUCKETS ? HIST_BUCKETS - 1 : us]++;
}

/* quantile is the round trip in µs below which a fraction q of the n
   recorded ones fall. */
static long quantile(uint64_t n, double q) {
    uint64_t rank = (uint64_t)(q * (double)(n ? n - 1 : 0)) + 1, acc = 0;
    for (long i = 0; i < HIST_BUCKETS; i++) {
        acc += hist[i];
        if (acc >= rank) return i;
    }
    return HIST_BUCKETS - 1;
}

/* print_result prints the result line of echoes over a window of wall
   seconds that cost cpu seconds. */
static void print_result(int clients, int window, int size, uint64_t echoes, double wall, double cpu) {
    printf("result clients=%d window=%d size=%d echoes_per_second=%.0f echoes_per_cpu_second=%.0f "
           "cpu_seconds=%.3f wall_seconds=%.3f p50_us=%ld p99_us=%ld\n",
           clients, window, size, echoes / wall, cpu > 0 ? echoes / cpu : 0, cpu, wall, quantile(echoes, 0.5), quantile(echoes, 0.99));
}

#endif
