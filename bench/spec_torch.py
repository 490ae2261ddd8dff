"""A brigade model spec as a PyTorch module: the network of the spec, whose
state_dict names ("0.weight", "4.bias", ...) are those of brigade's
checkpoints (docs/checkpoints.md). An nn.Sequential, with a forward that
knows residual blocks. The spec reader knows brigade's layers and options
(docs/model-spec.md) and takes the spec as valid: brigade checks it. Used
by eval_pytorch.py and step_pytorch.py."""
from torch import nn

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "gelu": nn.GELU}


class Residual(nn.Identity):
    """Opens a residual block: Stack keeps its input for the block's Add."""


class Shortcut(nn.Identity):
    """Ends a block's main branch: what follows up to the Add takes the
    block's input."""


class Add(nn.Identity):
    """Closes the innermost residual block: its output plus the block's input
    (with a Shortcut: the main branch's output plus the shortcut branch's)."""


class Stack(nn.Sequential):
    """nn.Sequential (its state_dict names "N.weight", ...) with residual
    blocks."""

    def forward(self, x):
        kept = []  # per open block: what its Add adds
        for layer in self:
            if isinstance(layer, Residual):
                kept.append(x)
            elif isinstance(layer, Shortcut):
                kept[-1], x = x, kept[-1]
            elif isinstance(layer, Add):
                x = x + kept.pop()
            else:
                x = layer(x)
        return x


def build(path, with_shape=False):
    """The network of the spec at `path` (softmax_cross_entropy left to the
    loss); with_shape: also its input shape as [c, h, w] (a vector input
    as [c]) and its number of classes."""
    layers, shape, image = [], None, True
    blocks = []  # the input shape of each open residual block
    for line in open(path, encoding="utf-8-sig"):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        kind, opts = words[0], dict(w.split("=", 1) for w in words[1:])
        if kind == "input":
            shape = [int(opts["channels"]), int(opts["height"]), int(opts["width"])]
            image = shape[1:] != [1, 1]
            # A 1x1 input is an image or a vector as the first layer that
            # needs one takes it (docs/model-spec.md); a vector otherwise.
            input_shape, input_image = list(shape), None if not image else True
            continue
        c, h, w = shape
        if input_image is None and kind in ("conv2d", "maxpool", "avgpool"):
            input_image = True
        elif input_image is None and kind in ("flatten", "dense", "softmax_cross_entropy"):
            input_image = False
        if kind == "conv2d":
            k, s = int(opts["kernel"]), int(opts.get("stride", 1))
            p = (k - 1) // 2 if opts.get("padding") == "same" else 0
            layers.append(nn.Conv2d(c, int(opts["filters"]), k, stride=s, padding=p))
            shape, image = [int(opts["filters"]), (h + 2 * p - k) // s + 1,
                            (w + 2 * p - k) // s + 1], True
        elif kind in ("maxpool", "avgpool"):
            k = int(opts["size"])
            s = int(opts.get("stride", k))
            pool = nn.MaxPool2d if kind == "maxpool" else nn.AvgPool2d
            layers.append(pool(k, stride=s))
            shape, image = [c, (h - k) // s + 1, (w - k) // s + 1], True
        elif kind == "flatten":
            layers.append(nn.Flatten())
            shape, image = [c * h * w, 1, 1], False
        elif kind == "dense":
            layers.append(nn.Linear(c * h * w, int(opts["units"])))
            shape, image = [int(opts["units"]), 1, 1], False
        elif kind in ACTIVATIONS:
            layers.append(ACTIVATIONS[kind]())
        elif kind == "layernorm":
            layers.append(nn.LayerNorm(shape if image else [c]))
        elif kind == "dropout":  # the identity here: the model is evaluated
            layers.append(nn.Dropout(float(opts.get("rate", 0.5))))
        elif kind == "residual":
            layers.append(Residual())
            blocks.append((shape, image))
        elif kind == "shortcut":
            layers.append(Shortcut())
            shape, image = blocks[-1]
        elif kind == "add":
            layers.append(Add())
            blocks.pop()
        elif kind == "softmax_cross_entropy":
            classes = shape[0]
            break
        else:
            raise SystemExit(f"{path}: unknown layer '{kind}'")
        act = opts.get("activation", "none")
        if kind in ("conv2d", "dense") and act in ACTIVATIONS:
            layers.append(ACTIVATIONS[act]())
    if with_shape:
        return Stack(*layers), (input_shape if input_image else input_shape[:1]), classes
    return Stack(*layers)
