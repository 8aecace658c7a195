"""``vecenv bench``: throughput, start-up time and memory of vecenv against SB3, Gymnasium and a plain loop.

- :mod:`vecenv.bench.workloads`: the envs (CartPole-v1, an 84x84x4 image env, a CPU-bound env).
- :mod:`vecenv.bench.runner`: the backends, the timing of one case, and the benchmark loop.
- :mod:`vecenv.bench.memory`: RSS / PSS of a process tree from ``/proc``.
- :mod:`vecenv.bench.report`: derived ratios, targets, Markdown table, JSON and PNG chart.
- :mod:`vecenv.bench.cli`: the ``vecenv bench`` command.

Importing this package imports nothing heavy: pandas and matplotlib (the ``bench`` extra) are imported when
a report is written.
"""
