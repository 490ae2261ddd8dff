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

/* Two residual blocks with shortcut branches: a downsampling convolution
 * block projected by a strided 1x1 convolution, and a dense block whose
 * shortcut branch holds a block of its own. 23 layers. */
#define BG_TEST_SHORTCUT_MODEL                                                                     \
    "input channels=2 height=8 width=8\n"                                                          \
    "conv2d filters=4 kernel=3 padding=same activation=relu\n"                                     \
    "residual\n"                                                                                   \
    "conv2d filters=8 kernel=3 stride=2 padding=same\n"                                            \
    "relu\n"                                                                                       \
    "conv2d filters=8 kernel=3 padding=same\n"                                                     \
    "shortcut\n"                                                                                   \
    "conv2d filters=8 kernel=1 stride=2\n"                                                         \
    "add\n"                                                                                        \
    "relu\n"                                                                                       \
    "flatten\n"                                                                                    \
    "dense units=16\n"                                                                             \
    "residual\n"                                                                                   \
    "dense units=8 activation=tanh\n"                                                              \
    "shortcut\n"                                                                                   \
    "dense units=8\n"                                                                              \
    "residual\n"                                                                                   \
    "dropout rate=0.3\n"                                                                           \
    "add\n"                                                                                        \
    "add\n"                                                                                        \
    "dense units=5\n"                                                                              \
    "softmax_cross_entropy\n"

#endif /* BG_TEST_MODELS_H */
