"""A toy training loop: fits y = 3x + 1 by gradient descent and prints the loss."""

import argparse
import json
import os
import random

import six  # installed by pip inside the image build (requirements.txt)

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--output_dir", default="/results")
flags = parser.parse_args()

random.seed(flags.seed)
w, b = 0.0, 0.0
for step in range(1, flags.steps + 1):
    x = random.uniform(-1, 1)
    error = (w * x + b) - (3 * x + 1)
    w -= flags.lr * 2 * error * x
    b -= flags.lr * 2 * error
    if step % 50 == 0:
        print(f"step {step} loss {error * error:.5f}", flush=True)

os.makedirs(flags.output_dir, exist_ok=True)
result = {"lr": flags.lr, "seed": flags.seed, "w": w, "b": b, "six": six.__version__}
with open(os.path.join(flags.output_dir, f"lr{flags.lr}-seed{flags.seed}.json"), "w") as handle:
    json.dump(result, handle)
print(json.dumps(result))
