"""Running and storing runs; nothing here knows the paper (:mod:`hcct_lite.reproduction` does).

- :mod:`.jobs`: one run from its settings to its stored file;
- :mod:`.runner`: resumable grids of runs in processes (the optional parts add Ray and a GPU
  queue);
- :mod:`.store` and :mod:`.schema`: whether a stored file may be reused;
- :mod:`.results`: the result files' format and tables; :mod:`.reading`: reading them back;
- :mod:`.verify`: rerunning a stored result to verify it.
"""
