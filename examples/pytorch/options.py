"""The command line the plain and the Lightning job share, and their precision."""

from __future__ import annotations

import argparse
import os

import torch


def job_parser(description: str) -> argparse.ArgumentParser:
    """The options both jobs take; hops submit's --samples and --batch-size are defaults."""
    env = os.environ
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--samples", type=lambda text: int(float(text)), default=env.get("HOPS_TOTAL_SAMPLES"),
        help="samples to train on in all (default: hops submit's --samples)",
    )  # fmt: skip
    parser.add_argument(
        "--batch", type=int, default=int(env.get("HOPS_BATCH_SIZE") or 32),
        help="per-GPU batch size, fixed (default: hops submit's --batch-size)",
    )  # fmt: skip
    parser.add_argument("--lr", type=float, default=0.02, help="learning rate at --base-gpus")
    parser.add_argument("--lr-scale", default="linear", choices=("linear", "sqrt", "none"))
    parser.add_argument("--base-gpus", type=int, default=1, help="GPU count --lr is meant for")
    parser.add_argument("--dataset-size", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--width", type=int, default=16, help="channels of the CNN")
    parser.add_argument(
        "--precision", type=int, default=32, choices=(32, 64),
        help="float bits of the model and data; 64 makes a moved job's loss comparable "
             "with its --reference to rounding (32 drifts about 1%% with thread count alone)",
    )  # fmt: skip
    parser.add_argument("--checkpoint", default="", help="default: ckpt-<job id> here")
    parser.add_argument("--sample-log", default="", help="directory: ids each rank trained")
    parser.add_argument("--result", default="", help="file: final loss and history (JSON)")
    parser.add_argument(
        "--device-rate", default="",
        help="on fake GPUs: samples/s of one GPU per type, e.g. a100=800,v100=400; each "
             "step lasts at least as long as on that GPU (times HOPS_NODE_SPEED)",
    )  # fmt: skip
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Parse, insist on a sample count, and set the float precision before any tensor."""
    args = parser.parse_args(argv)
    if args.samples is None:
        parser.error("--samples is needed outside hops (hops submit --samples sets it)")
    args.samples = int(float(args.samples))
    set_precision(args.precision)
    return args


def set_precision(bits: int) -> None:
    """Tensors made from here on (model, data) are float64 for 64, else float32."""
    torch.set_default_dtype(torch.float64 if bits == 64 else torch.float32)
