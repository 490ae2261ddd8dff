/* Device order (stages/device_order.h) against brute force: every ordered
 * choice of k of n devices, ranked by the slowest link, then the sum of
 * 1 / speed, then lexicographically. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "device_order.h"
#include "rng.h"

enum { BRUTE_MAX = 7 };

static double pair_speed(const double *bw, int n, int a, int b) {
    return fmin(bw[a * n + b], bw[b * n + a]);
}

/* The chain's slowest link and its sum of 1 / speed. */
static void chain_rank(const double *bw, int n, const int *order, int k, int cycle, double *slowest,
                       double *cost) {
    *slowest = INFINITY;
    *cost = 0;
    for (int i = 0; i + 1 < k; i++) {
        double w = pair_speed(bw, n, order[i], order[i + 1]);
        *slowest = fmin(*slowest, w);
        *cost += 1 / w;
    }
    if (cycle && k > 2) {
        double w = pair_speed(bw, n, order[k - 1], order[0]);
        *slowest = fmin(*slowest, w);
        *cost += 1 / w;
    }
}

typedef struct brute {
    const double *bw;
    int n, k, cycle;
    int perm[BRUTE_MAX], used[BRUTE_MAX], best[BRUTE_MAX];
    double best_slowest, best_cost;
    int found;
} brute_t;

/* Visits ordered choices in lexicographic order and keeps only strict
 * improvements, so ties keep the lexicographically first. */
static void brute(brute_t *b, int at) {
    if (at == b->k) {
        double slowest, cost;
        chain_rank(b->bw, b->n, b->perm, b->k, b->cycle, &slowest, &cost);
        int better = !b->found || slowest > b->best_slowest ||
                     (slowest == b->best_slowest && cost < b->best_cost * (1 - 1e-9));
        if (better) {
            b->found = 1;
            b->best_slowest = slowest;
            b->best_cost = cost;
            memcpy(b->best, b->perm, sizeof(int) * (size_t)b->k);
        }
        return;
    }
    for (int d = 0; d < b->n; d++) {
        if (b->used[d]) continue;
        b->used[d] = 1;
        b->perm[at] = d;
        brute(b, at + 1);
        b->used[d] = 0;
    }
}

static void test_equals_brute_force(void **state) {
    (void)state;
    bg_rng_t rng;
    bg_rng_seed(&rng, 5, 5);
    double bw[BRUTE_MAX * BRUTE_MAX];
    int order[BRUTE_MAX];
    for (int instance = 0; instance < 600; instance++) {
        int n = 1 + (int)bg_rng_below(&rng, BRUTE_MAX);
        int k = 1 + (int)bg_rng_below(&rng, (uint64_t)n);
        int cycle = (instance / 3) % 2;
        /* Few distinct speeds, so ties are common. */
        int levels = instance % 3 == 0 ? 3 : 1000;
        for (int i = 0; i < n * n; i++) bw[i] = 1 + (double)bg_rng_below(&rng, (uint64_t)levels);
        brute_t b = {.bw = bw, .n = n, .k = k, .cycle = cycle};
        brute(&b, 0);
        double slowest = 0;
        assert_int_equal(bg_device_choose(bw, n, k, cycle, order, &slowest), BG_OK);
        if (k > 1) assert_true(slowest == b.best_slowest);
        assert_memory_equal(order, b.best, sizeof(int) * (size_t)k);
    }
}

/* Devices of different sizes: by brute force over every ordered choice of
 * k < n, rules 1 and 2 first, then the largest smallest device of the
 * chain, then lexicographically by the devices' ranks largest first (the
 * order given among equal sizes), against bg_device_choose_sized. */
static void test_sized_equals_brute_force(void **state) {
    (void)state;
    bg_rng_t rng;
    bg_rng_seed(&rng, 7, 7);
    double bw[BRUTE_MAX * BRUTE_MAX], size[BRUTE_MAX];
    int order[BRUTE_MAX], chosen = 0, smaller = 0;
    for (int instance = 0; instance < 600; instance++) {
        const int n = 2 + (int)bg_rng_below(&rng, BRUTE_MAX - 1);
        const int k = 1 + (int)bg_rng_below(&rng, (uint64_t)(n - 1));
        const int cycle = (instance / 3) % 2;
        const int levels = instance % 3 == 0 ? 2 : 4; /* ties are common */
        for (int i = 0; i < n * n; i++) bw[i] = 1 + (double)bg_rng_below(&rng, (uint64_t)levels);
        for (int d = 0; d < n; d++) size[d] = (double)bg_rng_below(&rng, 3);
        /* rank: the devices largest first, the order given among equals
         * (each device's place is the count of those before it). */
        int rank[BRUTE_MAX];
        for (int d = 0; d < n; d++) {
            int place = 0;
            for (int e = 0; e < n; e++) place += size[e] > size[d] || (size[e] == size[d] && e < d);
            rank[place] = d;
        }
        double best_slowest = 0, best_cost = 0, best_least = 0;
        int best[BRUTE_MAX], found = 0;
        /* Every k-tuple of distinct ranks, in lexicographic order. */
        int r[BRUTE_MAX];
        uint64_t tuples = 1;
        for (int i = 0; i < k; i++) tuples *= (uint64_t)n;
        for (uint64_t t = 0; t < tuples; t++) {
            uint64_t v = t;
            int distinct = 1;
            for (int i = k - 1; i >= 0; i--, v /= (uint64_t)n) r[i] = (int)(v % (uint64_t)n);
            for (int i = 0; i < k; i++)
                for (int j = 0; j < i; j++) distinct &= r[i] != r[j];
            if (!distinct) continue;
            int devices[BRUTE_MAX];
            double least = INFINITY, slowest, cost;
            for (int i = 0; i < k; i++) {
                devices[i] = rank[r[i]];
                least = fmin(least, size[devices[i]]);
            }
            chain_rank(bw, n, devices, k, cycle, &slowest, &cost);
            const int tied = slowest == best_slowest && fabs(cost - best_cost) <= 1e-9 * best_cost;
            if (!found || slowest > best_slowest ||
                (slowest == best_slowest && cost < best_cost * (1 - 1e-9)) ||
                (tied && least > best_least)) {
                found = 1;
                best_slowest = slowest;
                best_cost = cost;
                best_least = least;
                memcpy(best, devices, sizeof(int) * (size_t)k);
            }
        }
        double slowest = 0;
        assert_int_equal(bg_device_choose_sized(bw, size, n, k, cycle, order, &slowest), BG_OK);
        if (k > 1) assert_true(slowest == best_slowest);
        if (memcmp(order, best, sizeof(int) * (size_t)k) != 0)
            fail_msg("instance %d (n=%d k=%d cycle=%d): chain differs from brute force", instance,
                     n, k, cycle);
        /* The rule mattered: plain bg_device_choose took a smaller device. */
        int plain[BRUTE_MAX];
        assert_int_equal(bg_device_choose(bw, n, k, cycle, plain, NULL), BG_OK);
        double plain_least = INFINITY;
        for (int i = 0; i < k; i++) plain_least = fmin(plain_least, size[plain[i]]);
        smaller += plain_least < best_least;
        chosen++;
    }
    print_message("%d instances, %d where the size rule chose larger devices\n", chosen, smaller);
    assert_true(smaller > 20);
}

/* A socket crossing is used once, not three times, though every chain of
 * eight has a crossing as its slowest link; and four stay on one socket. */
static void test_two_sockets(void **state) {
    (void)state;
    enum { N = 8 };
    /* Devices 0, 2, 4, 6 on socket A and 1, 3, 5, 7 on socket B: within a
     * socket 20, across 5. */
    double bw[N * N];
    for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++) bw[a * N + b] = a % 2 == b % 2 ? 20 : 5;
    int order[N];
    double slowest;
    assert_int_equal(bg_device_order(bw, N, 0, order, &slowest), BG_OK);
    const int want8[N] = {0, 2, 4, 6, 1, 3, 5, 7};
    assert_memory_equal(order, want8, sizeof want8);
    assert_true(slowest == 5);
    assert_int_equal(bg_device_choose(bw, N, 4, 0, order, &slowest), BG_OK);
    const int want4[4] = {0, 2, 4, 6};
    assert_memory_equal(order, want4, sizeof want4);
    assert_true(slowest == 20);
    /* A cycle of all eight must cross twice: out at once and back at the
     * end is the lexicographically first way. */
    assert_int_equal(bg_device_order(bw, N, 1, order, &slowest), BG_OK);
    const int cycle8[N] = {0, 1, 3, 5, 7, 2, 4, 6};
    assert_memory_equal(order, cycle8, sizeof cycle8);
}

/* Equal links keep the given order; above the exact limit, a greedy chain
 * of distinct devices that reports its slowest link. */
static void test_ties_and_greedy(void **state) {
    (void)state;
    bg_rng_t rng;
    bg_rng_seed(&rng, 7, 7);
    enum { N = BG_DEVICE_ORDER_EXACT_MAX + 4 };
    double bw[N * N];
    int order[N], used[N];
    for (int n = 1; n <= N; n++) {
        int greedy = n > BG_DEVICE_ORDER_EXACT_MAX;
        for (int i = 0; i < n * n; i++) bw[i] = greedy ? 1 + (double)bg_rng_below(&rng, 50) : 7;
        int k = greedy ? n - 2 : n;
        double slowest = 0, want, cost;
        assert_int_equal(bg_device_choose(bw, n, k, 0, order, &slowest), BG_OK);
        memset(used, 0, sizeof used);
        for (int i = 0; i < k; i++) {
            assert_true(order[i] >= 0 && order[i] < n && !used[order[i]]);
            used[order[i]] = 1;
            if (!greedy) assert_int_equal(order[i], i);
        }
        chain_rank(bw, n, order, k, 0, &want, &cost);
        assert_true(slowest == want);
    }
}

static void test_rejects(void **state) {
    (void)state;
    double bw[4] = {1, 1, 1, 1};
    int order[2];
    assert_int_equal(bg_device_choose(bw, 0, 0, 0, order, NULL), BG_ERR_INVALID);
    assert_int_equal(bg_device_choose(bw, 2, 3, 0, order, NULL), BG_ERR_INVALID);
    assert_int_equal(bg_device_choose(NULL, 2, 2, 0, order, NULL), BG_ERR_INVALID);
    bw[1] = 0;
    assert_int_equal(bg_device_choose(bw, 2, 2, 0, order, NULL), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "from device 0 to 1"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equals_brute_force),
        cmocka_unit_test(test_sized_equals_brute_force),
        cmocka_unit_test(test_two_sockets),
        cmocka_unit_test(test_ties_and_greedy),
        cmocka_unit_test(test_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
