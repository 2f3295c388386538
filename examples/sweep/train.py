"""A real, tiny training loop: fit y = 3x - 2 with mini-batch SGD and report the final loss and accuracy.

Run by the sweep example once per trial; standard library only.

Resumable (docs/long-runs.md): when ``XCORE_CHECKPOINT_DIR`` is set (xcore sets it for every
job) the loop saves its state (step, w, b, random state) there every ``CHECKPOINT_EVERY`` steps,
and on SIGUSR1 (a cluster's warning before a time limit) or SIGTERM (a preemption) saves it and
exits ``EXIT_RESUME`` (75) so that a retry policy with ``exit_codes=(75,)`` runs it again. An
attempt that finds a checkpoint goes on from it, to the same result as a run never stopped.
Without the variable nothing is saved and no signal is caught.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
from pathlib import Path

CHECKPOINT_EVERY = 100
EXIT_RESUME = 75  # os.EX_TEMPFAIL: "not finished, run me again"


def save(path: Path, step: int, w: float, b: float, rng: random.Random) -> None:
    """Write the state atomically (a reader never sees half a file), private to the user."""
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"step": step, "w": w, "b": b, "rng": rng.getstate()}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load(path: Path, rng: random.Random) -> tuple[int, float, float]:
    state = json.loads(path.read_text())
    version, internal, gauss_next = state["rng"]
    rng.setstate((version, tuple(internal), gauss_next))
    return state["step"], state["w"], state["b"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--batch_size", type=int, required=True)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output_dir", help="where to write metrics.json (default: nowhere)")
    # SUPPRESS: absent from metrics.json unless given
    parser.add_argument("--preempt_at", type=int, default=argparse.SUPPRESS,
                        help="attempt 1 signals itself (SIGUSR1) at this step: a simulated time limit")
    args = parser.parse_args()
    preempt_at = getattr(args, "preempt_at", None)

    rng = random.Random(args.seed)
    data = [(x, 3.0 * x - 2.0 + rng.gauss(0, 0.1)) for x in (rng.uniform(-1, 1) for _ in range(512))]
    w, b, done = 0.0, 0.0, 0
    checkpoint_dir = os.environ.get("XCORE_CHECKPOINT_DIR")
    checkpoint = Path(checkpoint_dir, "train.json") if checkpoint_dir else None
    stop: list[int] = []  # the signal received; the loop saves and exits at the next step boundary
    if checkpoint is not None:
        for signum in (signal.SIGUSR1, signal.SIGTERM):
            signal.signal(signum, lambda signum, frame: stop.append(signum))
        if checkpoint.exists():
            done, w, b = load(checkpoint, rng)
            print(f"resumed from step {done} (attempt {os.environ.get('XCORE_ATTEMPT', '?')})", flush=True)
    for step in range(done + 1, args.steps + 1):
        batch = rng.sample(data, args.batch_size)
        grad_w = sum(2 * (w * x + b - y) * x for x, y in batch) / len(batch)
        grad_b = sum(2 * (w * x + b - y) for x, y in batch) / len(batch)
        w, b = w - args.lr * grad_w, b - args.lr * grad_b
        if step % 100 == 0:
            loss = sum((w * x + b - y) ** 2 for x, y in data) / len(data)
            print(f"step {step}: loss {loss:.5f}", flush=True)
        if checkpoint is None:
            continue
        if step == preempt_at and os.environ.get("XCORE_ATTEMPT", "1") == "1":
            signal.raise_signal(signal.SIGUSR1)
        if stop or step % CHECKPOINT_EVERY == 0:
            save(checkpoint, step, w, b, rng)
        if stop:
            print(f"{signal.Signals(stop[0]).name} at step {step}: checkpoint saved, exiting {EXIT_RESUME}", flush=True)
            raise SystemExit(EXIT_RESUME)
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
