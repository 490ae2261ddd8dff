/* Device order: which of the given devices the stages run on, and in what
 * order, so that consecutive stages sit on the fastest links.
 *
 * The objective, in this order of priority:
 *   1. the slowest link between consecutive devices is as fast as possible
 *      (it bounds every micro-batch's transfers);
 *   2. then the sum over the chain's links of 1 / speed is least: the time
 *      one byte takes to cross every link, so a slow link (a socket
 *      crossing) is used as few times as the first rule allows;
 *   3. then the lexicographically smallest list of device indices, so equal
 *      links keep the order the user gave.
 * A pair of devices carries traffic both ways (activations one way,
 * gradients the other), so it counts at its slower direction. With `cycle`
 * the chain also closes from its last device back to its first, as
 * interleaved stages wrap around the devices.
 *
 * Exact for n <= BG_DEVICE_ORDER_EXACT_MAX devices: a binary search over the
 * link speeds for rule 1, each step a dynamic programme over subsets
 * (Held-Karp: O(2^n n^2), times n starts for a cycle) that also gives rule 2
 * and, walked forward, rule 3. Above that: greedy, starting from the fastest
 * pair and growing the chain at whichever end has the faster next link. */
#ifndef BG_DEVICE_ORDER_H
#define BG_DEVICE_ORDER_H

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { BG_DEVICE_ORDER_EXACT_MAX = 12 };

/* Chooses `k` of the `n` devices (1 <= k <= n <= BG_MAX_DEVICES) and their
 * order. `bandwidth` is n x n, entry a * n + b the speed from a to b (bytes
 * per second, > 0; the diagonal is not read). Writes k device indices into
 * `order` and the chain's slowest link into *slowest (if not NULL;
 * INFINITY for one device). BG_ERR_INVALID for bad sizes or a speed that is
 * not positive; BG_ERR_NOMEM. */
bg_status_t bg_device_choose(const double *bandwidth, int n, int k, int cycle, int *order,
                             double *slowest);

/* bg_device_choose for devices of different sizes (`size`, n entries: their
 * memory), with one more rule between 2 and 3: of the chains rules 1 and 2
 * tie, one whose smallest device is the largest, so that more fits; rule 3
 * then reads the devices largest first (in the order given among equal
 * sizes). Exact for k < n <= BG_DEVICE_ORDER_EXACT_MAX: the chooser runs on
 * the devices of at least each size, the largest first, until its chain is
 * as good by rules 1 and 2 as the best of all. With k = n, or above that
 * many devices, it is bg_device_choose (the order given breaks ties). */
bg_status_t bg_device_choose_sized(const double *bandwidth, const double *size, int n, int k,
                                   int cycle, int *order, double *slowest);

/* bg_device_choose with k = n: the order of all the devices. */
bg_status_t bg_device_order(const double *bandwidth, int n, int cycle, int *order, double *slowest);

#ifdef __cplusplus
}
#endif

#endif /* BG_DEVICE_ORDER_H */
