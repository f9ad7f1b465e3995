"""Running and storing runs.

One run or a resumable grid of runs to result files (:mod:`.runner`); the store that
decides whether a file may be reused (:mod:`.store`); the result files' format and tables
(:mod:`.results`); reading stored runs back (:mod:`.reading`: the report and the lessons
both read through it); and rerunning a stored result to verify it (:mod:`.verify`).

Nothing here knows the paper: the grids it runs are defined in
:mod:`hcct_lite.reproduction`.
"""
