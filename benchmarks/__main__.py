"""Run every benchmark: `python -m benchmarks` (tables on stdout, JSON in benchmarks/results/)."""

from __future__ import annotations

from benchmarks import bench_process, bench_ray, bench_runtime


def main() -> None:
    print("== runtime (thread children) ==")
    bench_runtime.main()
    print()
    print("== process children ==")
    bench_process.main()
    print()
    print("== Ray children (skipped without the ray extra) ==")
    bench_ray.main([])


if __name__ == "__main__":
    main()
