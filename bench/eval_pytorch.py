"""Cross-check: evaluates a brigade checkpoint with PyTorch. Builds the model
spec's network as an nn.Sequential (the layer numbering brigade's checkpoint
names follow; with residual blocks, one whose forward adds each block's
input back at its `add`), loads the weights with load_state_dict, and prints the test
loss and accuracy on Debian's Fashion-MNIST in brigade's format, for
comparison with `brigade train MODEL --steps 0 --load CHECKPOINT`:

    brigade train examples/fashion_mlp.model --epochs 1 --save mlp.safetensors
    brigade train examples/fashion_mlp.model --steps 0 --load mlp.safetensors
    python3 bench/eval_pytorch.py examples/fashion_mlp.model mlp.safetensors

Needs torch and safetensors (pip). The spec reader knows brigade's layers and
options (docs/model-spec.md) and takes the spec as valid: brigade checks it.
"""
import argparse

import torch
from safetensors.torch import load_file
from torch import nn

from fashion_idx import read_idx

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


def build(path):
    """The network of the spec at `path` (softmax_cross_entropy left to the
    loss)."""
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
            continue
        c, h, w = shape
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
            break
        else:
            raise SystemExit(f"{path}: unknown layer '{kind}'")
        act = opts.get("activation", "none")
        if kind in ("conv2d", "dense") and act in ACTIVATIONS:
            layers.append(ACTIVATIONS[act]())
    return Stack(*layers)


parser = argparse.ArgumentParser()
parser.add_argument("model")
parser.add_argument("checkpoint")
parser.add_argument("--threads", type=int, default=2)
args = parser.parse_args()
torch.set_num_threads(args.threads)

model = build(args.model)
tensors = load_file(args.checkpoint)
model.load_state_dict({k: v for k, v in tensors.items() if not k.startswith("optimizer.")})
model.eval()
x = torch.tensor(read_idx("t10k-images-idx3-ubyte") / 255.0, dtype=torch.float32).unsqueeze(1)
y = torch.tensor(read_idx("t10k-labels-idx1-ubyte"), dtype=torch.long)
with torch.no_grad():
    logits = model(x)
    loss = nn.functional.cross_entropy(logits, y, reduction="mean").item()
    accuracy = (logits.argmax(1) == y).float().mean().item()
print(f"test accuracy: {accuracy:.4f} (test loss {loss:.4f})")
