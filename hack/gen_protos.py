#!/usr/bin/env python3
"""Regenerates the Python gRPC code for the kubelet-facing protos.

Reads every `protos/*.proto`, runs `python -m grpc_tools.protoc` (pb2, pb2_grpc and
.pyi stubs) and writes the result as one flat package, `simdra/_driver/kubelet/gen/` by default.
grpc_tools emits top-level imports (`import dra_v1_pb2`), which only work with the output
directory on sys.path; they are rewritten to package-relative imports so the modules
load as `simdra._driver.kubelet.gen.<module>`.

The output is deterministic for a given grpcio-tools release, which is why that release
is pinned: tests/kubelet/test_generated_code.py regenerates and compares byte for byte.

Usage: gen_protos.py [--out DIR]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "protos"
DEFAULT_OUT = ROOT / "simdra" / "_driver" / "kubelet" / "gen"
# Must equal the grpcio-tools pin in pyproject.toml: other releases emit other code.
GRPCIO_TOOLS_VERSION = "1.85.1"

INIT_TEXT = '''"""Generated gRPC code for the kubelet-facing protos in protos/.

Do not edit: regenerate with hack/gen-protos.sh.
"""
'''

_TOP_LEVEL_IMPORT = re.compile(r"^import (\w+_pb2) as (\w+)$", re.MULTILINE)


def check_tools_version() -> None:
    """Refuse to run with a grpcio-tools release other than the pinned one."""
    installed = importlib.metadata.version("grpcio-tools")
    if installed != GRPCIO_TOOLS_VERSION:
        raise SystemExit(
            f"gen_protos: grpcio-tools {installed} is installed but the committed code is "
            f"generated with grpcio-tools=={GRPCIO_TOOLS_VERSION} (pyproject.toml test extra)"
        )


def relative_imports(source: str) -> str:
    """Rewrite grpc_tools' top-level `import x_pb2 as y` into `from . import x_pb2 as y`."""
    return _TOP_LEVEL_IMPORT.sub(r"from . import \1 as \2", source)


def run_protoc(protos: list[Path], out_dir: Path) -> None:
    """Run grpc_tools.protoc once for all protos, writing into out_dir."""
    cmd = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"-I{PROTO_DIR}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *(p.name for p in protos),
    ]
    result = subprocess.run(cmd, cwd=PROTO_DIR, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"gen_protos: protoc failed ({result.returncode}):\n{result.stderr}")


def generate() -> dict[str, str]:
    """Generate all modules; return file name -> final text (imports already rewritten)."""
    protos = sorted(PROTO_DIR.glob("*.proto"))
    if not protos:
        raise SystemExit(f"gen_protos: no .proto files in {PROTO_DIR}")
    with tempfile.TemporaryDirectory(prefix="simdra-gen-") as tmp:
        run_protoc(protos, Path(tmp))
        files = {p.name: relative_imports(p.read_text()) for p in Path(tmp).iterdir()}
    files["__init__.py"] = INIT_TEXT
    return files


def write_package(files: dict[str, str], out_dir: Path) -> None:
    """Make out_dir hold exactly these files (stale generated modules are removed)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.iterdir():
        if old.is_file() and old.suffix in (".py", ".pyi") and old.name not in files:
            old.unlink()
    for name, text in sorted(files.items()):
        (out_dir / name).write_text(text)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output package dir")
    args = parser.parse_args(argv)
    check_tools_version()
    write_package(generate(), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
