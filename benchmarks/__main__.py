"""Run every benchmark: `python -m benchmarks` (tables on stdout, JSON in benchmarks/results/).

`python -m benchmarks chaos [--n 1000] [--seed 1] [--storm]`: the chaos run instead;
`python -m benchmarks store`: the durable store alone, against memory and DBOS;
`python -m benchmarks agent_clis [--quick]`: agent CLIs' event streams through Zeus alone;
`python -m benchmarks real_clis [--quick] [--profile]`: the real agent CLIs, a turn under
Zeus against the same program alone (offline, in a loopback-only network namespace);
`python -m benchmarks hosts`: several hosts on one PostgreSQL (takeover, throughput).
"""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:2] == ["store"]:
        from benchmarks import bench_store

        bench_store.main(sys.argv[2:])
        return
    if sys.argv[1:2] == ["hosts"]:
        from benchmarks import bench_hosts

        bench_hosts.main(sys.argv[2:])
        return
    if sys.argv[1:2] == ["real_clis"]:
        from benchmarks import bench_real_clis

        bench_real_clis.main(sys.argv[2:])
        return
    if sys.argv[1:2] == ["agent_clis"]:
        from benchmarks import bench_agent_clis

        bench_agent_clis.main(sys.argv[2:])
        return
    if sys.argv[1:2] == ["chaos"]:
        from benchmarks import chaos

        raise SystemExit(chaos.main(sys.argv[2:]))
    # Imported here, after the subcommands, which need none of them.
    from benchmarks import (
        bench_agent_clis,
        bench_async,
        bench_command,
        bench_hostile,
        bench_input,
        bench_integrations,
        bench_process,
        bench_ray,
        bench_reattach,
        bench_runtime,
        bench_throughput,
    )

    print("== runtime (thread children) ==")
    bench_runtime.main()
    print()
    print("== process children ==")
    bench_process.main()
    print()
    print("== command agents: under a worker against under the supervisor ==")
    bench_command.main([])
    print()
    print("== process children that outlive their host, picked up again ==")
    bench_reattach.main([])
    print()
    print("== agent CLIs' event streams through Zeus, against a bare reader ==")
    bench_agent_clis.main([])
    print()
    print("== in an asyncio host ==")
    bench_async.main()
    print("== input: agent-written text and routing files ==")
    bench_input.main()
    print("== integrations (those whose extra is installed) ==")
    bench_integrations.main()
    print("== under hostile load ==")
    bench_hostile.main()
    print("== throughput through Zeus, and the supervisor's CPU per delegation ==")
    bench_throughput.main([])
    print("== the real agent CLIs, offline (skipped without them or root) ==")
    from benchmarks import bench_real_clis

    bench_real_clis.main(["--quick"])
    print("== Ray children (skipped without the ray extra) ==")
    bench_ray.main([])
    print("== zeus ui (skipped without the ui extra) ==")
    try:
        from benchmarks import bench_ui
    except ImportError as exc:
        print(f"skipped: {exc.name} is missing (pip install -e '.[ui,test]')")
    else:
        bench_ui.main()


if __name__ == "__main__":
    main()
