/* Device order (declared in partition.h): the chain of devices whose slowest
 * link between neighbours is as fast as possible. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "devices.h"
#include "partition.h"

typedef struct order_problem {
    const double *bandwidth;
    int k, cycle;
} order_problem_t;

/* A pair carries traffic both ways: it is as fast as its slower direction. */
static double link_speed(const order_problem_t *p, int a, int b) {
    double ab = p->bandwidth[a * p->k + b], ba = p->bandwidth[b * p->k + a];
    return ab < ba ? ab : ba;
}

static double slowest_link(const order_problem_t *p, const int *order) {
    double slowest = INFINITY;
    for (int i = 0; i + 1 < p->k; i++) {
        double w = link_speed(p, order[i], order[i + 1]);
        if (w < slowest) slowest = w;
    }
    if (p->cycle && p->k > 1) {
        double w = link_speed(p, order[p->k - 1], order[0]);
        if (w < slowest) slowest = w;
    }
    return slowest;
}

/* ok[mask * k + v]: the devices of `mask` can be visited in a chain that
 * starts at v (a member of mask) with every link >= threshold; for a cycle,
 * the chain must also end next to device 0, where the cycle starts. */
static void reachable(const order_problem_t *p, double threshold, unsigned char *ok) {
    const int k = p->k;
    for (uint32_t mask = 1; mask < (1u << k); mask++) {
        for (int v = 0; v < k; v++) {
            unsigned char r = 0;
            if (mask & (1u << v)) {
                uint32_t rest = mask & ~(1u << v);
                if (rest == 0) {
                    r = !p->cycle || k == 1 || (v != 0 && link_speed(p, v, 0) >= threshold);
                } else {
                    for (int u = 0; u < k && !r; u++)
                        r = (rest & (1u << u)) && link_speed(p, v, u) >= threshold &&
                            ok[rest * (uint32_t)k + (uint32_t)u];
                }
            }
            ok[mask * (uint32_t)k + (uint32_t)v] = r;
        }
    }
}

/* First device a full chain can start from at `threshold`, or -1. */
static int chain_start(const order_problem_t *p, const unsigned char *ok) {
    uint32_t all = (1u << p->k) - 1;
    if (p->cycle) return ok[all * (uint32_t)p->k] ? 0 : -1;
    for (int v = 0; v < p->k; v++)
        if (ok[all * (uint32_t)p->k + (uint32_t)v]) return v;
    return -1;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static bg_status_t order_exact(const order_problem_t *p, int *order) {
    const int k = p->k;
    unsigned char *ok = malloc((size_t)k << k);
    double *speeds = malloc(sizeof(double) * (size_t)(k * k + 1));
    if (ok == NULL || speeds == NULL) {
        free(ok);
        free(speeds);
        return bg_error_set(BG_ERR_NOMEM, "device order: out of memory");
    }
    int count = 0;
    for (int a = 0; a < k; a++)
        for (int b = a + 1; b < k; b++) speeds[count++] = link_speed(p, a, b);
    if (count == 0) speeds[count++] = INFINITY;
    qsort(speeds, (size_t)count, sizeof *speeds, compare_doubles);
    /* The answer is one of the link speeds; the slowest always admits a
     * chain. Binary search for the fastest that still does. */
    int lo = 0, hi = count - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        reachable(p, speeds[mid], ok);
        if (chain_start(p, ok) >= 0)
            lo = mid;
        else
            hi = mid - 1;
    }
    reachable(p, speeds[lo], ok);
    /* Smallest device first at every step among those that can finish. */
    int at = chain_start(p, ok);
    uint32_t rest = ((1u << k) - 1) & ~(1u << at);
    order[0] = at;
    for (int i = 1; i < k; i++) {
        int next = 0;
        while (!((rest & (1u << next)) && link_speed(p, at, next) >= speeds[lo] &&
                 ok[rest * (uint32_t)k + (uint32_t)next]))
            next++;
        order[i] = next;
        rest &= ~(1u << next);
        at = next;
    }
    free(ok);
    free(speeds);
    return BG_OK;
}

/* Fastest pair first, then the fastest link from either end of the chain. */
static bg_status_t order_greedy(const order_problem_t *p, int *order) {
    const int k = p->k;
    unsigned char *used = calloc((size_t)k, 1);
    int *chain = malloc(sizeof(int) * (size_t)(2 * k));
    if (used == NULL || chain == NULL) {
        free(used);
        free(chain);
        return bg_error_set(BG_ERR_NOMEM, "device order: out of memory");
    }
    int a0 = 0, b0 = 1;
    for (int a = 0; a < k; a++)
        for (int b = a + 1; b < k; b++)
            if (link_speed(p, a, b) > link_speed(p, a0, b0)) a0 = a, b0 = b;
    int head = k, tail = k; /* chain[head .. tail] */
    chain[head] = a0;
    chain[++tail] = b0;
    used[a0] = used[b0] = 1;
    for (int placed = 2; placed < k; placed++) {
        int best = -1, at_head = 0;
        double speed = -INFINITY;
        for (int u = 0; u < k; u++) {
            if (used[u]) continue;
            double to_tail = link_speed(p, chain[tail], u), to_head = link_speed(p, chain[head], u);
            if (to_tail > speed) best = u, speed = to_tail, at_head = 0;
            if (to_head > speed) best = u, speed = to_head, at_head = 1;
        }
        used[best] = 1;
        if (at_head)
            chain[--head] = best;
        else
            chain[++tail] = best;
    }
    for (int i = 0; i < k; i++) order[i] = chain[head + i];
    free(used);
    free(chain);
    return BG_OK;
}

bg_status_t bg_device_order(const double *bandwidth, int devices, int cycle, int *order,
                            double *slowest) {
    if (bandwidth == NULL || order == NULL || devices < 1 || devices > BG_MAX_DEVICES)
        return bg_error_set(BG_ERR_INVALID, "device order: %d devices (need 1..%d and a matrix)",
                            devices, BG_MAX_DEVICES);
    order_problem_t p = {.bandwidth = bandwidth, .k = devices, .cycle = cycle != 0};
    if (devices == 1) {
        order[0] = 0;
    } else if (devices <= BG_DEVICE_ORDER_EXACT_MAX) {
        BG_CHECK(order_exact(&p, order));
    } else {
        BG_CHECK(order_greedy(&p, order));
    }
    if (slowest != NULL) *slowest = slowest_link(&p, order);
    return BG_OK;
}
