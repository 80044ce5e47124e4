"""Cost of the test allocator's CEL selectors: evaluation per selector per device, import.

Evaluates a few typical DeviceClass / request selectors against one device many times and
prints microseconds per evaluation. The floor is the same decision written as a plain
Python comparison on the same data, measured in the same run; the ratio says how much the
CEL evaluator costs over it. Then it prints the time `import simdra._driver.testing.scheduler`
takes in a fresh interpreter, beside a floor of `python -c pass`, and the time to compile
one selector the first time (the parser is built lazily, once).

    python bench/cel_bench.py [--rounds 2000]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time

DRIVER = "gpu.example.com"
DEVICE = {
    "name": "gpu-0",
    "attributes": {
        "model": {"string": "H100"},
        "index": {"int": 3},
        "driverVersion": {"version": "550.54.15"},
        "modes": {"strings": ["compute", "graphics"]},
    },
    "capacity": {"memory": {"value": "80Gi"}},
}
A = f'device.attributes["{DRIVER}"]'
C = f'device.capacity["{DRIVER}"]'
SELECTORS = {
    "driver ==": f"device.driver == '{DRIVER}'",
    "attr == && int >": f"{A}.model == 'H100' && {A}.index > 2",
    "quantity compareTo": f'{C}.memory.compareTo(quantity("40Gi")) >= 0',
    "semver isGreaterThan": f'{A}.driverVersion.isGreaterThan(semver("535.0.0"))',
    "string startsWith": f"{A}.model.startsWith('H')",
    "in list": f"'compute' in {A}.modes",
    "has() || missing": f"!has({A}.serial) || {A}.serial == 'x'",
    "matches()": f"{A}.model.matches('^H[0-9]+$')",
}


def _per_call_us(call, rounds: int) -> float:
    # CPU time of this process, best of 7: the machine is shared, wall time is noise.
    samples = []
    for _ in range(7):
        start = time.process_time()
        for _ in range(rounds):
            call()
        samples.append((time.process_time() - start) / rounds * 1e6)
    return min(samples)


def _floor(rounds: int) -> float:
    device = {"driver": DRIVER, "model": DEVICE["attributes"]["model"]["string"], "index": 3}
    return _per_call_us(lambda: device["model"] == "H100" and device["index"] > 2, rounds)


def _import_cpu_seconds(code: str) -> float:
    """CPU time (user + sys) of `python -c code`, best of 5: robust to a loaded machine."""
    runs = []
    for _ in range(5):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", code], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        runs.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return min(runs)


def _cel_import_ms() -> float:
    """`-X importtime`'s cumulative time of simdra._driver.testing.allocation.cel, best of 5."""
    runs = []
    for _ in range(5):
        report = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import simdra._driver.testing.scheduler"],
            check=True, capture_output=True, text=True,
        ).stderr  # fmt: skip
        for line in report.splitlines():
            fields = line.split("|")
            if len(fields) == 3 and fields[2].strip() == "simdra._driver.testing.allocation.cel":
                runs.append(int(fields[1]) / 1000)
    return min(runs)


def main() -> None:
    """Print per-evaluation cost of each selector and the import cost."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    rounds = parser.parse_args().rounds

    start = time.perf_counter()
    from simdra._driver.testing.allocation.cel import DeviceView, compile_selector

    first = compile_selector("device.driver == 'x'")
    first_compile = time.perf_counter() - start
    view = DeviceView.of(DRIVER, DEVICE)
    first.matches(view)

    floor = _floor(rounds)
    print(f"floor (plain Python comparison): {floor:.3f} us")
    for label, expression in SELECTORS.items():
        try:
            selector = compile_selector(expression)
            selector.matches(view)
        except Exception as error:  # the old subset refuses some of these
            print(f"{label:<22} refused: {type(error).__name__}")
            continue
        cost = _per_call_us(lambda s=selector: s.matches(view), rounds)
        print(f"{label:<22} {cost:9.1f} us/eval  {cost / floor:8.0f}x floor")
    uncached = compile_selector.__wrapped__
    compile_cost = _per_call_us(lambda: uncached(SELECTORS["attr == && int >"]), 50)
    print(f"compile (uncached, 'attr == && int >'): {compile_cost:.0f} us")
    print(f"import + first compile in this process: {first_compile * 1000:.0f} ms")

    bare = _import_cpu_seconds("pass")
    allocator = _import_cpu_seconds("import simdra._driver.testing.scheduler")
    print(f"CPU: python -c pass {bare * 1000:.0f} ms; import simdra._driver.testing.scheduler "
          f"{allocator * 1000:.0f} ms (+{(allocator - bare) * 1000:.0f} ms), of which "
          f"simdra._driver.testing.allocation.cel {_cel_import_ms():.0f} ms "
          "(-X importtime)")


if __name__ == "__main__":
    main()
