"""Size of the simdra image against its goal (300 MB on a Python slim base), and what simdra
adds on top of the base image (the floor, measured in the same run).

Needs the image built already (`docker build -t simdra:latest .`, or podman) and the base
image it was built from present locally:

    python bench/image_size_bench.py [--image simdra:latest]
        [--base python:3.12-slim-bookworm] [--engine podman|docker]

Prints the sizes, each layer simdra's Dockerfile adds, and the ratios.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys

MB = 1000 * 1000
GOAL_MB = 300


def engine_command(wanted: str | None) -> str:
    """The container engine to ask: the one named, else podman, else docker."""
    for name in [wanted] if wanted else ["podman", "docker"]:
        if name and shutil.which(name):
            return name
    raise SystemExit(f"image_size_bench: no container engine found ({wanted or 'podman, docker'})")


def image_size(engine: str, image: str) -> int:
    """Bytes the engine reports for a local image."""
    done = subprocess.run([engine, "image", "inspect", image], capture_output=True, text=True,
                          check=False, timeout=60)
    if done.returncode != 0:
        raise SystemExit(f"image_size_bench: no local image {image}: {done.stderr.strip()}")
    return int(json.loads(done.stdout)[0]["Size"])


def layers(engine: str, image: str) -> list[tuple[str, str]]:
    """(size as the engine prints it, instruction) per layer, newest first."""
    done = subprocess.run([engine, "history", "--no-trunc", "--format",
                           "{{.Size}}\t{{.CreatedBy}}", image],
                          capture_output=True, text=True, check=True, timeout=60)
    return [tuple(line.split("\t", 1)) for line in done.stdout.splitlines()  # type: ignore[misc]
            if "\t" in line]


def main(argv: list[str] | None = None) -> int:
    """Print the numbers; exit status 0 either way (a benchmark, not a test)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="simdra:latest")
    parser.add_argument("--base", default="python:3.12-slim-bookworm",
                        help="the PYTHON_IMAGE the image was built from")
    parser.add_argument("--engine", choices=["podman", "docker"])
    args = parser.parse_args(argv)
    engine = engine_command(args.engine)

    total, base = image_size(engine, args.image), image_size(engine, args.base)
    print(f"image {args.image}: {total / MB:.0f} MB (goal {GOAL_MB} MB: "
          f"{total / (GOAL_MB * MB):.2f} of it)")
    print(f"base  {args.base}: {base / MB:.0f} MB (floor)")
    print(f"simdra adds {(total - base) / MB:.0f} MB ({total / base:.2f}x the base)")
    for size, created_by in layers(engine, args.image)[:8]:
        print(f"  {size:>10}  {created_by[:100]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
