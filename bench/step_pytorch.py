"""The same step as bench_step.c in PyTorch: a model spec's network (the
origin CNN, examples/fashion_cnn.model, unless --model says), batch 64,
Adam, one thread, random data. Prints the median and mean step time in ms.
--device cuda runs it on the GPU (eager, FP32 with TF32 off, as brigade),
waiting for the GPU at the end of every step. With the batch on the GPU
throughout, PyTorch's step leaves out what brigade's includes: bringing the
batch to the device. --host-batch then times the steps again with the batch
in pinned host memory, copied to the GPU (non_blocking) at every step, as a
training loop over a DataLoader with pin_memory does."""
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
parser.add_argument("--host-batch", action="store_true",
                    help="also time steps that copy the batch from pinned host memory")
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


def time_steps(batch):
    """Step times in seconds after 20 warm-up steps; batch() gives (x, y)."""
    times = []
    for k in range(20 + args.steps):
        wait()
        t0 = time.perf_counter()
        xb, yb = batch()
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        wait()
        if k >= 20:
            times.append(time.perf_counter() - t0)
    return times


def report(times, name):
    mean = sum(times) / len(times)
    times = sorted(times)
    median = times[len(times) // 2]
    print(f"pytorch {torch.__version__} step{name}: median {median * 1e3:.3f} ms "
          f"(min {times[0] * 1e3:.3f}, p90 {times[len(times) * 9 // 10] * 1e3:.3f})")
    key = name.strip().replace(" ", "_").replace(",", "")
    key = "pytorch_" + (key + "_" if key else "")
    print(f"{key}step_ms {median * 1e3:.4f}")
    print(f"{key}mean_step_ms {mean * 1e3:.4f}")


if device.type == "cuda":
    print(f"cudnn {torch.backends.cudnn.version()}, benchmark {torch.backends.cudnn.benchmark}, "
          f"{torch.cuda.get_device_name(0)}")
report(time_steps(lambda: (x, y)), "")
if args.host_batch:
    x_host, y_host = x.cpu(), y.cpu()
    if device.type == "cuda":
        x_host, y_host = x_host.pin_memory(), y_host.pin_memory()
    report(time_steps(lambda: (x_host.to(device, non_blocking=True),
                               y_host.to(device, non_blocking=True))), " host batch")
