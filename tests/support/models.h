/* Model specs the tests share. */
#ifndef BG_TEST_MODELS_H
#define BG_TEST_MODELS_H

/* The origin CNN (examples/fashion_cnn.model without its comments): conv 32
 * 3x3 + relu, max-pool 2, dense 128 + relu, dense 10, on 28x28 images. A
 * string literal, so that sizeof works where it is used. */
#define BG_TEST_ORIGIN_CNN                                                                         \
    "input channels=1 height=28 width=28\n"                                                        \
    "conv2d filters=32 kernel=3 activation=relu\n"                                                 \
    "maxpool size=2\n"                                                                             \
    "flatten\n"                                                                                    \
    "dense units=128 activation=relu\n"                                                            \
    "dense units=10\n"                                                                             \
    "softmax_cross_entropy\n"

#endif /* BG_TEST_MODELS_H */
