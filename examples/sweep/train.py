"""A real, tiny training loop: fit y = 3x - 2 with mini-batch SGD and report the final loss and accuracy.

Run by the sweep example once per trial; standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import random
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--batch_size", type=int, required=True)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output_dir", help="where to write metrics.json (default: nowhere)")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    data = [(x, 3.0 * x - 2.0 + rng.gauss(0, 0.1)) for x in (rng.uniform(-1, 1) for _ in range(512))]
    w, b = 0.0, 0.0
    for step in range(1, args.steps + 1):
        batch = rng.sample(data, args.batch_size)
        grad_w = sum(2 * (w * x + b - y) * x for x, y in batch) / len(batch)
        grad_b = sum(2 * (w * x + b - y) for x, y in batch) / len(batch)
        w, b = w - args.lr * grad_w, b - args.lr * grad_b
        if step % 100 == 0:
            loss = sum((w * x + b - y) ** 2 for x, y in data) / len(data)
            print(f"step {step}: loss {loss:.5f}", flush=True)
    loss = sum((w * x + b - y) ** 2 for x, y in data) / len(data)
    if args.output_dir:
        output = Path(args.output_dir)
        os.umask(0o077)  # results (by default under $XCORE_HOME) stay private to the user, like xcore's own files
        output.mkdir(parents=True, exist_ok=True)
        (output / "metrics.json").write_text(json.dumps({"loss": loss, "w": w, "b": b, **vars(args)}))
    # accuracy: the share of points predicted within 0.2 of their target
    accuracy = sum(abs(w * x + b - y) < 0.2 for x, y in data) / len(data)
    print(f"final loss {loss:.5f} (w={w:.3f}, b={b:.3f})")
    # xcore's result convention (see xcore/runtime/results.py): `xcore show` and `xcore ui` show these
    print("XCORE_RESULT " + json.dumps({"loss": loss, "accuracy": accuracy}), flush=True)


if __name__ == "__main__":
    main()
