"""Size of the simdra image against its goal (300 MB on a Python slim base), and what simdra
adds on top of the base image (the floor, measured in the same run).

Needs the image built already (`docker build -t simdra:latest .`, or podman) and the base
image it was built from present locally:

    python bench/image_size_bench.py [--image simdra:latest]
        [--base python:3.11-slim-bookworm] [--engine podman|docker]
        [--store DIR] [--compare OTHER_IMAGE]

Prints the sizes, each layer simdra's Dockerfile adds, and the ratios. `--store` reads a
podman storage of its own, e.g. the e2e's (tests/e2e/images.sh):
`--store ~/.cache/simdra-e2e/podman/storage --base localhost/simdra-e2e/debian-python:...`.
`--compare` also prints how much bigger or smaller IMAGE is than OTHER_IMAGE (e.g. the
same Dockerfile built from an older commit).
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


def engine_argv(engine: str, store: str | None) -> list[str]:
    """The engine command, pointed at a podman storage of its own when `store` is given."""
    if store is None:
        return [engine]
    if engine != "podman":
        raise SystemExit("image_size_bench: --store needs podman")
    return [engine, "--root", store, "--storage-driver", "overlay"]


def image_size(engine: list[str], image: str) -> int:
    """Bytes the engine reports for a local image."""
    done = subprocess.run([*engine, "image", "inspect", image], capture_output=True, text=True,
                          check=False, timeout=60)
    if done.returncode != 0:
        raise SystemExit(f"image_size_bench: no local image {image}: {done.stderr.strip()}")
    return int(json.loads(done.stdout)[0]["Size"])


def layers(engine: list[str], image: str) -> list[tuple[str, str]]:
    """(size as the engine prints it, instruction) per layer, newest first."""
    done = subprocess.run([*engine, "history", "--no-trunc", "--format",
                           "{{.Size}}\t{{.CreatedBy}}", image],
                          capture_output=True, text=True, check=True, timeout=60)
    return [tuple(line.split("\t", 1)) for line in done.stdout.splitlines()  # type: ignore[misc]
            if "\t" in line]


def main(argv: list[str] | None = None) -> int:
    """Print the numbers; exit status 0 either way (a benchmark, not a test)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="simdra:latest")
    parser.add_argument("--base", default="python:3.11-slim-bookworm",
                        help="the PYTHON_IMAGE the image was built from")
    parser.add_argument("--engine", choices=["podman", "docker"])
    parser.add_argument("--store", help="podman storage directory (podman --root)")
    parser.add_argument("--compare", help="another local image to compare the size with")
    args = parser.parse_args(argv)
    engine = engine_argv(engine_command(args.engine), args.store)

    total, base = image_size(engine, args.image), image_size(engine, args.base)
    print(f"image {args.image}: {total / MB:.0f} MB (goal {GOAL_MB} MB: "
          f"{total / (GOAL_MB * MB):.2f} of it)")
    print(f"base  {args.base}: {base / MB:.0f} MB (floor)")
    print(f"simdra adds {(total - base) / MB:.0f} MB ({total / base:.2f}x the base)")
    if args.compare:
        other = image_size(engine, args.compare)
        print(f"vs {args.compare}: {other / MB:.0f} MB, {(total - other) / MB:+.0f} MB "
              f"({total / other:.2f}x); what simdra adds: {(other - base) / MB:.0f} -> "
              f"{(total - base) / MB:.0f} MB")
    for size, created_by in layers(engine, args.image)[:8]:
        print(f"  {size:>10}  {created_by[:100]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
