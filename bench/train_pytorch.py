"""Reference run: the origin CNN in PyTorch on Debian's Fashion-MNIST, with
brigade's defaults (Adam, lr 1e-3, batch 64, x/255, shuffled each epoch).
Prints test accuracy after each epoch, for comparison with
`brigade train examples/fashion_cnn.model --epochs E`.

    /usr/bin/python3 bench/train_pytorch.py --epochs 5 [--threads 2] [--seed 1]
"""
import argparse
import time

import torch
from torch import nn

from fashion_idx import read_idx

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--threads", type=int, default=2)
parser.add_argument("--seed", type=int, default=1)
args = parser.parse_args()
torch.set_num_threads(args.threads)
torch.manual_seed(args.seed)

x_train = torch.tensor(read_idx("train-images-idx3-ubyte") / 255.0, dtype=torch.float32)
y_train = torch.tensor(read_idx("train-labels-idx1-ubyte"), dtype=torch.long)
x_test = torch.tensor(read_idx("t10k-images-idx3-ubyte") / 255.0, dtype=torch.float32)
y_test = torch.tensor(read_idx("t10k-labels-idx1-ubyte"), dtype=torch.long)
x_train, x_test = x_train.unsqueeze(1), x_test.unsqueeze(1)

model = nn.Sequential(
    nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
    nn.Linear(32 * 13 * 13, 128), nn.ReLU(), nn.Linear(128, 10))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_fn = nn.CrossEntropyLoss()
for epoch in range(1, args.epochs + 1):
    start = time.perf_counter()
    order = torch.randperm(len(x_train))
    model.train()
    for at in range(0, len(x_train), 64):
        idx = order[at:at + 64]
        optimizer.zero_grad()
        loss = loss_fn(model(x_train[idx]), y_train[idx])
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        correct = (model(x_test).argmax(1) == y_test).sum().item()
    print(f"epoch {epoch}: test accuracy {correct / len(x_test):.4f} "
          f"({time.perf_counter() - start:.1f} s)", flush=True)
