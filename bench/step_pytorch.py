"""The same step as bench_step.c in PyTorch: the origin CNN, batch 64, Adam,
one thread, random data. Prints the median step time in ms."""
import argparse
import time

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=64)
parser.add_argument("--steps", type=int, default=200)
args = parser.parse_args()

torch.set_num_threads(1)
torch.manual_seed(0)
model = nn.Sequential(
    nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
    nn.Linear(32 * 13 * 13, 128), nn.ReLU(), nn.Linear(128, 10))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_fn = nn.CrossEntropyLoss()
x = torch.rand(args.batch, 1, 28, 28)
y = torch.randint(0, 10, (args.batch,))

times = []
for k in range(20 + args.steps):
    t0 = time.perf_counter()
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    if k >= 20:
        times.append(time.perf_counter() - t0)
times.sort()
median = times[len(times) // 2]
print(f"pytorch {torch.__version__} step: median {median * 1e3:.3f} ms "
      f"(min {times[0] * 1e3:.3f}, p90 {times[len(times) * 9 // 10] * 1e3:.3f})")
print(f"pytorch_step_ms {median * 1e3:.4f}")
