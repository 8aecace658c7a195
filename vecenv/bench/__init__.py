"""``vecenv bench``: throughput, start-up time and memory of vecenv against SB3, Gymnasium and a plain loop.

- :mod:`vecenv.bench.workloads`: the envs (CartPole-v1, an 84x84x4 image env, a CPU-bound env).
- :mod:`vecenv.bench.adapters`: the backends behind one interface for the timing loop.
- :mod:`vecenv.bench.backends`: the backends by name, how each is built and what it needs.
- :mod:`vecenv.bench.case`: one case measured in this process (start-up, warm-up, timed repeats, memory).
- :mod:`vecenv.bench.isolated`: one case in a fresh Python process.
- :mod:`vecenv.bench.runner`: the benchmark loop (which cases, running them, the run's outcome).
- :mod:`vecenv.bench.memory`: RSS / PSS of a process tree from ``/proc``.
- :mod:`vecenv.bench.machine`: the host (CPUs, memory, load, versions).
- :mod:`vecenv.bench.tables`: the results with derived ratios, and the Markdown table.
- :mod:`vecenv.bench.targets`: vecenv's performance targets checked against the results.
- :mod:`vecenv.bench.chart`: the PNG chart.
- :mod:`vecenv.bench.report`: bench.json, bench.md and bench.png of a run.
- :mod:`vecenv.bench.autotune`: ``vecenv bench --autotune``: the layouts for one env, timed side by side.
- :mod:`vecenv.bench.cli`: the ``vecenv bench`` command.

Importing this package imports nothing heavy: pandas and matplotlib (the ``bench`` extra) are imported when
a report is written.
"""
