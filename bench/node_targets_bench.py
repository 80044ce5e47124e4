"""Every node-scale target in one run: start-up, the prepare path, memory and idle CPU.

Runs the three benches in turn, each against its own floor measured in the same run
(a minimal gRPC server and the atomic-write primitive; a bare interpreter with grpc and
protobuf), and prints one table: each figure with its target and PASS or MISS.

    python bench/node_targets_bench.py [--claims 2000] [--shares 1000] [--window 30]

The parts alone: `startup_bench.py`, `node_scale_bench.py`, `node_memory_bench.py`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benches

import node_memory_bench
import node_scale_bench
import startup_bench
from targets import table


def main() -> None:
    """Run the three benches and print their rows as one table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=2000,
                        help="claims of the prepare-path rounds")
    parser.add_argument("--shares", type=int, default=1000,
                        help="NIC shares prepared on the largest node of the memory part")
    parser.add_argument("--window", type=float, default=30.0,
                        help="seconds of idle CPU measured per inventory size")
    parser.add_argument("--runs", type=int, default=7, help="start-ups measured")
    args = parser.parse_args()
    sections = [
        ("start-up", startup_bench.measure(args.runs)),
        ("prepare path", node_scale_bench.measure(args.claims)),
        ("memory and idle", node_memory_bench.measure(window=args.window,
                                                      claims=args.shares)),
    ]
    print()
    for title, rows in sections:
        print(table(f"== {title}", rows))
    verdicts = [row.passed for _, rows in sections for row in rows if row.passed is not None]
    print(f"targets met: {sum(verdicts)} of {len(verdicts)}")


if __name__ == "__main__":
    main()
