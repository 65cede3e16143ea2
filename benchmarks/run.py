"""Run every benchmark (benchmarks/bench_*.py) and print their figures: `make bench`."""

from __future__ import annotations

import runpy
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(names: list[str]) -> int:
    scripts = sorted(HERE.glob("bench_*.py"))
    if names:
        scripts = [s for s in scripts if any(n in s.stem for n in names)]
    failed = 0
    for script in scripts:
        print(f"\n=== {script.stem} ===", flush=True)
        t0 = time.perf_counter()
        sys.argv = [str(script)]  # each script's own defaults (the names given here are not its arguments)
        try:
            runpy.run_path(str(script), run_name="__main__")
        except SystemExit as exc:
            if exc.code not in (0, None):
                failed += 1
        except Exception as exc:  # report and go on with the other benchmarks
            print(f"{script.stem} failed: {type(exc).__name__}: {exc}")
            failed += 1
        print(f"({script.stem}: {time.perf_counter() - t0:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
