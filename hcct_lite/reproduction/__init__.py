"""The reproduction of the paper.

Its reported numbers (:mod:`.paper`); its experiments as grids of runs at Table III
settings (:mod:`.paper_grids`, the studies beyond it in :mod:`.study_grids`); Table II's
collaboration patterns (:mod:`.motivating_example`); the checked claims of Figs. 3-6
(:mod:`.figure_checks`); and the generated report ``docs/reproduction.md`` (:mod:`.report`
and its ``report_*`` sections).

It reads stored runs through :mod:`hcct_lite.runs` and trains only by running its grids
there.
"""
