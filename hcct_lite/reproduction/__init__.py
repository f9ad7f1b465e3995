"""The reproduction of the paper: its numbers, grids of runs, checked claims and report.

Its numbers are in :mod:`.paper`, its experiments in :mod:`.paper_grids` and
:mod:`.study_grids`, Table II in :mod:`.motivating_example`, the claims of Figs. 3-6 in
:mod:`.figure_checks`, and ``docs/reproduction.md`` comes from :mod:`.report`.
"""
