"""The paper's experiments: running grids, the paper's numbers, Table 1, Figs.

4-7 and the reproduction report (``docs/reproduction.md``).
"""
