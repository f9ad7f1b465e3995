"""Running and storing runs.

One run from its settings to its stored file (:mod:`.jobs`); resumable grids of runs in
processes (:mod:`.runner`; the optional parts add Ray and a GPU queue); the store that
decides whether a file may be reused (:mod:`.store`, by :mod:`.schema`'s rules); the
result files' format and tables (:mod:`.results`); reading stored runs back
(:mod:`.reading`: the report and the lessons both read through it); and rerunning a stored
result to verify it (:mod:`.verify`).

Nothing here knows the paper: the grids it runs are defined in
:mod:`hcct_lite.reproduction`.
"""
