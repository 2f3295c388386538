"""A stand-in training script: parses --lr and --seed, 'trains', prints a loss."""

import argparse
import math
import random

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, required=True)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()
random.seed(args.seed)
loss = abs(math.log10(args.lr) + 2) + random.random() * 0.1
print(f"lr={args.lr:.5f} seed={args.seed} loss={loss:.4f}")
