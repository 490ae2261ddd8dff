"""The same step as bench_step.c in PyTorch: a model spec's network (the
origin CNN, examples/fashion_cnn.model, unless --model says), batch 64,
Adam, one thread, random data. Prints the median and mean step time in ms.
--device cuda runs it on the GPU (eager, FP32 with TF32 off, as brigade),
waiting for the GPU at the end of every step."""
import argparse
import os
import time

import torch
from torch import nn

from spec_torch import build

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=64)
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
parser.add_argument("--model", default=os.path.join(ROOT, "examples", "fashion_cnn.model"),
                    help="a brigade model spec (default: the origin CNN)")
args = parser.parse_args()

torch.set_num_threads(1)
torch.manual_seed(0)
device = torch.device(args.device)
if device.type == "cuda":
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
model, shape, classes = build(args.model, with_shape=True)
model = model.to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_fn = nn.CrossEntropyLoss()
x = torch.rand(args.batch, *shape, device=device)
y = torch.randint(0, classes, (args.batch,), device=device)


def wait():
    if device.type == "cuda":
        torch.cuda.synchronize()



times = []
for k in range(20 + args.steps):
    wait()
    t0 = time.perf_counter()
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    wait()
    if k >= 20:
        times.append(time.perf_counter() - t0)
mean = sum(times) / len(times)
times.sort()
median = times[len(times) // 2]
print(f"pytorch {torch.__version__} step: median {median * 1e3:.3f} ms "
      f"(min {times[0] * 1e3:.3f}, p90 {times[len(times) * 9 // 10] * 1e3:.3f})")
print(f"pytorch_step_ms {median * 1e3:.4f}")
print(f"pytorch_mean_step_ms {mean * 1e3:.4f}")
