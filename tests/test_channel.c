/* The channel between two stages on CPU devices (scheduler/channel.h): a
 * ring of slots that carries each micro-batch's tensor once, tells a wait
 * that slept from one that only took the lock, holds a sender back while
 * the ring is full, gives up after the stall timeout, and wakes everyone on
 * abort, whether they sleep or poll. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_cpu.h"
#include "channel.h"
#include "monotonic.h"

enum { FLOATS = 64 };

typedef struct fixture {
    bg_backend_t *be;
    bg_channel_t *ch;
} fixture_t;

/* A channel whose waits poll for `poll_s` before they sleep (0: never). */
static bg_channel_t *make_polling_channel(int capacity, double timeout_s, double poll_s) {
    bg_channel_config_t cfg = {.slot_bytes = sizeof(float) * FLOATS,
                               .capacity = capacity,
                               .name = "activations stage 0 -> 1",
                               .timeout_s = timeout_s,
                               .poll_s = poll_s};
    bg_channel_t *ch = NULL;
    assert_int_equal(bg_channel_create(&cfg, &ch), BG_OK);
    return ch;
}

static bg_channel_t *make_channel(int capacity, double timeout_s) {
    return make_polling_channel(capacity, timeout_s, 0);
}

static int setup(void **state) {
    fixture_t *f = calloc(1, sizeof *f);
    bg_cpu_config_t cfg = BG_CPU_CONFIG_INIT;
    if (f == NULL || bg_backend_cpu_create(&cfg, &f->be) != BG_OK) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture_t *f = *state;
    bg_channel_destroy(f->ch);
    bg_backend_destroy(f->be);
    free(f);
    return 0;
}

static void sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static void fill(float *x, float value) {
    for (int i = 0; i < FLOATS; i++) x[i] = value + (float)i;
}

/* A thread that, after a pause, receives or sends one micro-batch. */
typedef struct peer {
    fixture_t *f;
    int microbatch, pause_ms, send;
    bg_status_t status;
    bg_channel_timing_t timing;
    float data[FLOATS];
} peer_t;

static void *peer_main(void *arg) {
    peer_t *peer = arg;
    sleep_ms(peer->pause_ms);
    size_t bytes = 0;
    peer->status = peer->send
                       ? bg_channel_send(peer->f->ch, peer->f->be, peer->microbatch, peer->data,
                                         sizeof peer->data, &peer->timing, NULL)
                       : bg_channel_recv(peer->f->ch, peer->f->be, peer->microbatch, peer->data,
                                         sizeof peer->data, &bytes, &peer->timing);
    return NULL;
}

/* Messages arrive whole, by micro-batch, in any order; a send into a free
 * slot and a receive of a message already there do not count as blocked. */
static void test_messages_by_microbatch(void **state) {
    fixture_t *f = *state;
    f->ch = make_channel(2, 5);
    float a[FLOATS], b[FLOATS], out[FLOATS];
    fill(a, 100);
    fill(b, 200);
    bg_channel_timing_t t = {0};
    assert_int_equal(bg_channel_send(f->ch, f->be, 0, a, sizeof a, &t, NULL), BG_OK);
    assert_int_equal(t.blocked, 0);
    assert_true(t.call <= t.ready && t.ready <= t.done);
    assert_int_equal(bg_channel_send(f->ch, f->be, 1, b, sizeof b / 2, &t, NULL), BG_OK);
    size_t bytes = 0;
    assert_int_equal(bg_channel_recv(f->ch, f->be, 1, out, sizeof out, &bytes, &t), BG_OK);
    assert_int_equal(t.blocked, 0);
    assert_int_equal(bytes, sizeof b / 2);
    assert_memory_equal(out, b, sizeof b / 2);
    assert_int_equal(bg_channel_recv(f->ch, f->be, 0, out, sizeof out, &bytes, &t), BG_OK);
    assert_int_equal(bytes, sizeof a);
    assert_memory_equal(out, a, sizeof a);
    /* A message larger than the slots is a bug of the caller. */
    float big[2 * FLOATS];
    assert_int_equal(bg_channel_send(f->ch, f->be, 2, big, sizeof big, NULL, NULL),
                     BG_ERR_INTERNAL);
    assert_string_equal(bg_error_message(),
                        "activations stage 0 -> 1: message of 512 bytes, slots hold 256");
}

/* Between host slots a trading receive copies, as bg_channel_recv: the
 * caller's buffer stays its own (slots trade only on a GPU:
 * test_cuda_pipeline's test_channel_trades_on_gpu). */
static void test_trading_receive_copies_on_host(void **state) {
    fixture_t *f = *state;
    f->ch = make_channel(1, 5);
    float a[FLOATS], out[FLOATS];
    fill(a, 300);
    assert_int_equal(bg_channel_send(f->ch, f->be, 0, a, sizeof a, NULL, NULL), BG_OK);
    void *dst = out;
    size_t bytes = 0;
    assert_int_equal(bg_channel_recv_trading(f->ch, f->be, 0, &dst, sizeof out, &bytes, NULL),
                     BG_OK);
    assert_ptr_equal(dst, out);
    assert_int_equal(bytes, sizeof a);
    assert_memory_equal(out, a, sizeof a);
}

/* Receives micro-batch `mb` on f->ch, which a thread sends after a pause
 * of `pause_ms`; checks that it came whole and returns the receive's
 * timing. */
static bg_channel_timing_t receive_after_pause(fixture_t *f, int mb, int pause_ms) {
    peer_t sender = {.f = f, .microbatch = mb, .pause_ms = pause_ms, .send = 1};
    fill(sender.data, (float)mb);
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, peer_main, &sender), 0);
    float out[FLOATS];
    size_t bytes = 0;
    bg_channel_timing_t t = {0};
    assert_int_equal(bg_channel_recv(f->ch, f->be, mb, out, sizeof out, &bytes, &t), BG_OK);
    pthread_join(thread, NULL);
    assert_int_equal(sender.status, BG_OK);
    assert_int_equal(bytes, sizeof out);
    assert_memory_equal(out, sender.data, sizeof out);
    return t;
}

/* A receive before its message sleeps until the sender comes (blocked); a
 * send into a full ring sleeps until a receive frees a slot. */
static void test_waits_that_sleep_are_blocked(void **state) {
    fixture_t *f = *state;
    f->ch = make_channel(2, 5);
    bg_channel_timing_t t = receive_after_pause(f, 3, 50);
    assert_int_equal(t.blocked, 1);
    assert_true(t.ready - t.call >= 0.03); /* it slept through the sender's pause */
    assert_true(t.ready <= t.copied && t.copied <= t.done);
    /* The sender's copy ends when the message is published, before the
     * receiver it woke could take it; its send, after that wake. */
    peer_t sender = {.f = f, .microbatch = 4, .pause_ms = 50, .send = 1};
    pthread_t sending;
    assert_int_equal(pthread_create(&sending, NULL, peer_main, &sender), 0);
    float in[FLOATS];
    size_t got = 0;
    assert_int_equal(bg_channel_recv(f->ch, f->be, 4, in, sizeof in, &got, &t), BG_OK);
    pthread_join(sending, NULL);
    assert_int_equal(sender.status, BG_OK);
    assert_true(sender.timing.ready <= sender.timing.copied &&
                sender.timing.copied <= sender.timing.done);
    assert_true(sender.timing.copied <= t.ready);

    float x[FLOATS];
    fill(x, 0);
    assert_int_equal(bg_channel_send(f->ch, f->be, 0, x, sizeof x, NULL, NULL), BG_OK);
    assert_int_equal(bg_channel_send(f->ch, f->be, 1, x, sizeof x, NULL, NULL), BG_OK);
    peer_t receiver = {.f = f, .microbatch = 0, .pause_ms = 50, .send = 0};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, peer_main, &receiver), 0);
    assert_int_equal(bg_channel_send(f->ch, f->be, 2, x, sizeof x, &t, NULL), BG_OK);
    pthread_join(thread, NULL);
    assert_int_equal(receiver.status, BG_OK);
    assert_int_equal(t.blocked, 1);
    assert_true(t.ready - t.call >= 0.03);
}

/* With the ring full and nobody receiving, a send gives up after the stall
 * timeout, saying so; a receive of a message that never comes too. */
static void test_stall_timeout(void **state) {
    fixture_t *f = *state;
    f->ch = make_channel(1, 0.05);
    float x[FLOATS];
    fill(x, 0);
    assert_int_equal(bg_channel_send(f->ch, f->be, 0, x, sizeof x, NULL, NULL), BG_OK);
    assert_int_equal(bg_channel_send(f->ch, f->be, 1, x, sizeof x, NULL, NULL), BG_ERR_STALLED);
    assert_string_equal(bg_error_message(), "activations stage 0 -> 1: no room to send "
                                            "micro-batch 1 for 0.05 s (stall timeout)");
    size_t bytes = 0;
    assert_int_equal(bg_channel_recv(f->ch, f->be, 5, x, sizeof x, &bytes, NULL), BG_ERR_STALLED);
    assert_string_equal(bg_error_message(), "activations stage 0 -> 1: micro-batch 5 did not "
                                            "arrive within 0.05 s (stall timeout)");
}

/* Abort wakes a waiting receiver and fails every call until reset, which
 * also drops the pending messages. */
static void test_abort_and_reset(void **state) {
    fixture_t *f = *state;
    f->ch = make_channel(2, 0);
    peer_t receiver = {.f = f, .microbatch = 0, .pause_ms = 0, .send = 0};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, peer_main, &receiver), 0);
    sleep_ms(20);
    bg_channel_abort(f->ch);
    pthread_join(thread, NULL);
    assert_int_equal(receiver.status, BG_ERR_INTERNAL);
    float x[FLOATS];
    fill(x, 0);
    assert_int_equal(bg_channel_send(f->ch, f->be, 0, x, sizeof x, NULL, NULL), BG_ERR_INTERNAL);
    assert_string_equal(bg_error_message(), "activations stage 0 -> 1: aborted");
    bg_channel_reset(f->ch);
    assert_int_equal(bg_channel_send(f->ch, f->be, 0, x, sizeof x, NULL, NULL), BG_OK);
    assert_int_equal(bg_channel_send(f->ch, f->be, 1, x, sizeof x, NULL, NULL), BG_OK);
    bg_channel_reset(f->ch); /* both slots free again */
    assert_int_equal(bg_channel_send(f->ch, f->be, 2, x, sizeof x, NULL, NULL), BG_OK);
    assert_int_equal(bg_channel_send(f->ch, f->be, 3, x, sizeof x, NULL, NULL), BG_OK);
    assert_int_equal(bg_channel_bytes(f->ch), 2 * sizeof x);
}

/* A wait that polls (here for up to 2 s) ends as soon as the message
 * comes or the channel is aborted, not when its polling does, and counts
 * as blocked. */
static void test_polling_waits(void **state) {
    fixture_t *f = *state;
    f->ch = make_polling_channel(2, 0, 2.0);
    bg_channel_timing_t t = receive_after_pause(f, 1, 30);
    assert_int_equal(t.blocked, 1);
    assert_true(t.ready - t.call >= 0.02);
    assert_true(t.ready - t.call < 1.0);

    peer_t receiver = {.f = f, .microbatch = 7, .pause_ms = 0, .send = 0};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, peer_main, &receiver), 0);
    sleep_ms(20);
    const double aborted_at = bg_monotonic_seconds();
    bg_channel_abort(f->ch);
    pthread_join(thread, NULL);
    assert_int_equal(receiver.status, BG_ERR_INTERNAL);
    assert_true(bg_monotonic_seconds() - aborted_at < 1.0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_messages_by_microbatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trading_receive_copies_on_host, setup, teardown),
        cmocka_unit_test_setup_teardown(test_waits_that_sleep_are_blocked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stall_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abort_and_reset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_polling_waits, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
