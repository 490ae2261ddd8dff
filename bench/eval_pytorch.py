"""Cross-check: evaluates a brigade checkpoint with PyTorch. Builds the model
spec's network as an nn.Sequential (the layer numbering brigade's checkpoint
names follow; with residual blocks, one whose forward adds each block's
input back at its `add`), loads the weights with load_state_dict, and prints the test
loss and accuracy on Debian's Fashion-MNIST in brigade's format, for
comparison with `brigade train MODEL --steps 0 --load CHECKPOINT`:

    brigade train examples/fashion_mlp.model --epochs 1 --save mlp.safetensors
    brigade train examples/fashion_mlp.model --steps 0 --load mlp.safetensors
    python3 bench/eval_pytorch.py examples/fashion_mlp.model mlp.safetensors

Needs torch and safetensors (pip). The network comes from spec_torch.py.
"""
import argparse

import torch
from safetensors.torch import load_file
from torch import nn

from fashion_idx import read_idx
from spec_torch import build

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
