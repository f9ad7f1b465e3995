"""The paper's experiments: running grids, the paper's numbers, Table II, Figs.

3-6 and the reproduction report (``docs/reproduction.md``).
"""
