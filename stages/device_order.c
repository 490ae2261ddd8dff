#include "device_order.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "devices.h"

typedef struct order_problem {
    const double *bandwidth;
    int n, k, cycle;
} order_problem_t;

/* Two costs closer than this (relative) are equal, so that sums added in
 * different orders still tie and rule 3 decides. */
static const double tie = 1e-9;

static int less(double a, double b) { return a < b - tie * fabs(b); }

static double link_speed(const order_problem_t *p, int a, int b) {
    double ab = p->bandwidth[a * p->n + b], ba = p->bandwidth[b * p->n + a];
    return ab < ba ? ab : ba;
}

static double slowest_link(const order_problem_t *p, const int *order) {
    double slowest = INFINITY;
    for (int i = 0; i + 1 < p->k; i++) {
        double w = link_speed(p, order[i], order[i + 1]);
        if (w < slowest) slowest = w;
    }
    if (p->cycle && p->k > 2) {
        double w = link_speed(p, order[p->k - 1], order[0]);
        if (w < slowest) slowest = w;
    }
    return slowest;
}

/* The cost of one link at `threshold`: 1 / speed, or INFINITY when the
 * link is slower than the threshold. */
static double link_cost(const order_problem_t *p, int a, int b, double threshold) {
    double w = link_speed(p, a, b);
    return w >= threshold ? 1.0 / w : INFINITY;
}

/* finish[mask * n + v]: the least cost of completing a chain of k devices
 * that has visited `mask` and stands at v (a member of mask), using links
 * of at least `threshold`; for a cycle, including the closing link back to
 * `start`. INFINITY when no completion exists. A superset of a mask is a
 * larger number, so masks run downwards. */
static void fill_finish(const order_problem_t *p, double threshold, int start, double *finish) {
    const int n = p->n;
    for (uint32_t mask = (1u << n) - 1; mask >= 1; mask--) {
        int size = __builtin_popcount(mask);
        for (int v = 0; v < n; v++) {
            double best = INFINITY;
            if ((mask & (1u << v)) && size <= p->k) {
                if (size == p->k) {
                    best = p->cycle && p->k > 2 ? link_cost(p, v, start, threshold) : 0;
                } else {
                    for (int u = 0; u < n; u++) {
                        if (mask & (1u << u)) continue;
                        double c = link_cost(p, v, u, threshold) +
                                   finish[(mask | (1u << u)) * (uint32_t)n + (uint32_t)u];
                        if (c < best) best = c;
                    }
                }
            }
            finish[mask * (uint32_t)n + (uint32_t)v] = best;
        }
    }
}

/* The best chain at `threshold`: its first device in *start (-1 if there is
 * none) and its cost; `finish` holds the table of that start. For a path
 * the table does not depend on the start, so it is filled once. */
static double best_start(const order_problem_t *p, double threshold, double *finish, int *start) {
    double best = INFINITY;
    *start = -1;
    if (!p->cycle) fill_finish(p, threshold, 0, finish);
    for (int s = 0; s < p->n; s++) {
        if (p->cycle) fill_finish(p, threshold, s, finish);
        double c = finish[(1u << s) * (uint32_t)p->n + (uint32_t)s];
        if (isfinite(c) && (*start < 0 || less(c, best))) best = c, *start = s;
    }
    if (p->cycle && *start >= 0) fill_finish(p, threshold, *start, finish);
    return best;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static bg_status_t choose_exact(const order_problem_t *p, int *order) {
    const int n = p->n;
    double *finish = malloc(sizeof(double) * ((size_t)n << n));
    double *speeds = malloc(sizeof(double) * (size_t)(n * n + 1));
    if (finish == NULL || speeds == NULL) {
        free(finish);
        free(speeds);
        return bg_error_set(BG_ERR_NOMEM, "device order: out of memory");
    }
    int count = 0, start;
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) speeds[count++] = link_speed(p, a, b);
    if (count == 0) speeds[count++] = INFINITY;
    qsort(speeds, (size_t)count, sizeof *speeds, compare_doubles);
    /* Rule 1: the answer is one of the link speeds, and the slowest always
     * admits a chain; binary search for the fastest that still does. */
    int lo = 0, hi = count - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        best_start(p, speeds[mid], finish, &start);
        if (start >= 0)
            lo = mid;
        else
            hi = mid - 1;
    }
    /* Rules 2 and 3: the cheapest chain at that speed, walked forward
     * taking the smallest next device that stays cheapest. */
    const double threshold = speeds[lo];
    best_start(p, threshold, finish, &start);
    uint32_t mask = 1u << start;
    order[0] = start;
    for (int i = 1; i < p->k; i++) {
        int at = order[i - 1];
        double here = finish[mask * (uint32_t)n + (uint32_t)at];
        int next = -1;
        for (int u = 0; u < n && next < 0; u++) {
            if (mask & (1u << u)) continue;
            double c = link_cost(p, at, u, threshold) +
                       finish[(mask | (1u << u)) * (uint32_t)n + (uint32_t)u];
            if (isfinite(c) && !less(here, c)) next = u;
        }
        order[i] = next;
        mask |= 1u << next;
    }
    free(finish);
    free(speeds);
    return BG_OK;
}

/* Fastest pair first, then the fastest link from either end of the chain,
 * until it holds k devices. */
static bg_status_t choose_greedy(const order_problem_t *p, int *order) {
    const int n = p->n, k = p->k;
    unsigned char *used = calloc((size_t)n, 1);
    int *chain = malloc(sizeof(int) * (size_t)(2 * k + 1));
    if (used == NULL || chain == NULL) {
        free(used);
        free(chain);
        return bg_error_set(BG_ERR_NOMEM, "device order: out of memory");
    }
    int a0 = 0, b0 = 1;
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++)
            if (link_speed(p, a, b) > link_speed(p, a0, b0)) a0 = a, b0 = b;
    int head = k, tail = k; /* chain[head .. tail] */
    chain[head] = a0;
    chain[++tail] = b0;
    used[a0] = used[b0] = 1;
    for (int placed = 2; placed < k; placed++) {
        int best = -1, at_head = 0;
        double speed = -INFINITY;
        for (int u = 0; u < n; u++) {
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

bg_status_t bg_device_choose(const double *bandwidth, int n, int k, int cycle, int *order,
                             double *slowest) {
    if (bandwidth == NULL || order == NULL || n < 1 || n > BG_MAX_DEVICES || k < 1 || k > n)
        return bg_error_set(BG_ERR_INVALID,
                            "device order: %d of %d devices (need 1 <= k <= n <= %d and a matrix)",
                            k, n, BG_MAX_DEVICES);
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++)
            if (a != b && !(bandwidth[a * n + b] > 0))
                return bg_error_set(BG_ERR_INVALID,
                                    "device order: the link from device %d to %d has speed %g "
                                    "(must be positive)",
                                    a, b, bandwidth[a * n + b]);
    order_problem_t p = {.bandwidth = bandwidth, .n = n, .k = k, .cycle = cycle != 0};
    if (k == 1) {
        order[0] = 0;
    } else if (n <= BG_DEVICE_ORDER_EXACT_MAX) {
        BG_CHECK(choose_exact(&p, order));
    } else {
        BG_CHECK(choose_greedy(&p, order));
    }
    if (slowest != NULL) *slowest = slowest_link(&p, order);
    return BG_OK;
}

/* The chain's sum of 1 / speed over its links (rule 2). */
static double chain_cost(const order_problem_t *p, const int *order) {
    double cost = 0;
    for (int i = 0; i + 1 < p->k; i++) cost += 1.0 / link_speed(p, order[i], order[i + 1]);
    if (p->cycle && p->k > 2) cost += 1.0 / link_speed(p, order[p->k - 1], order[0]);
    return cost;
}

/* bg_device_choose over the devices rank[0..m): *order the chosen k as
 * indices of the whole n, *slowest and *cost the chain's rules 1 and 2.
 * `sub` holds m x m speeds. */
static bg_status_t choose_among(const double *bandwidth, int n, const int *rank, int m, int k,
                                int cycle, double *sub, int *order, double *slowest, double *cost) {
    for (int a = 0; a < m; a++)
        for (int b = 0; b < m; b++) sub[a * m + b] = bandwidth[rank[a] * n + rank[b]];
    BG_CHECK(bg_device_choose(sub, m, k, cycle, order, slowest));
    const order_problem_t p = {.bandwidth = sub, .n = m, .k = k, .cycle = cycle != 0};
    *cost = chain_cost(&p, order);
    for (int i = 0; i < k; i++) order[i] = rank[order[i]];
    return BG_OK;
}

bg_status_t bg_device_choose_sized(const double *bandwidth, const double *size, int n, int k,
                                   int cycle, int *order, double *slowest) {
    if (size == NULL || k < 1 || k >= n || n > BG_DEVICE_ORDER_EXACT_MAX)
        return bg_device_choose(bandwidth, n, k, cycle, order, slowest);
    int rank[BG_DEVICE_ORDER_EXACT_MAX], trial[BG_DEVICE_ORDER_EXACT_MAX];
    double sub[BG_DEVICE_ORDER_EXACT_MAX * BG_DEVICE_ORDER_EXACT_MAX];
    /* The devices largest first, in the order given among equals (an
     * insertion sort: stable, and n is small). */
    for (int i = 0; i < n; i++) rank[i] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && size[rank[j]] > size[rank[j - 1]]; j--) {
            const int t = rank[j];
            rank[j] = rank[j - 1];
            rank[j - 1] = t;
        }
    double best_slowest, best_cost;
    BG_CHECK(choose_among(bandwidth, n, rank, n, k, cycle, sub, order, &best_slowest, &best_cost));
    if (slowest != NULL) *slowest = best_slowest;
    for (int m = k; m < n; m++) {
        if (size[rank[m - 1]] == size[rank[m]]) continue; /* not all of one size and up */
        double s, c;
        BG_CHECK(choose_among(bandwidth, n, rank, m, k, cycle, sub, trial, &s, &c));
        /* A subset's best is never better than all's; as good, within
         * the rounding `tie` allows. */
        if (!less(s, best_slowest) && !less(best_cost, c)) {
            memcpy(order, trial, sizeof(int) * (size_t)k);
            if (slowest != NULL) *slowest = s;
            break;
        }
    }
    return BG_OK;
}

bg_status_t bg_device_order(const double *bandwidth, int n, int cycle, int *order,
                            double *slowest) {
    return bg_device_choose(bandwidth, n, n, cycle, order, slowest);
}
