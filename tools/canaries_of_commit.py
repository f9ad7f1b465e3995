"""Run today's canaries with the code of older commits, and compare their numbers.

    python tools/canaries_of_commit.py COMMIT [COMMIT ...]

For each commit, its ``hcct_lite`` (``git archive``) runs the canary runs of
``hcct_lite/runs/canary.py`` in a fresh process pinned as the canaries are
(``canary.pinned_env``), and so does today's code; each canary's numbers (every epoch's
groups, client errors, training losses and update cosines: the keys both codes write) are
compared exactly. This is the evidence behind ``KNOWN_CODE`` in
``hcct_lite/runs/store.py``: the code of a commit whose canaries all give today's
numbers computes what compute version 1 computes. A canary is run by older code only where
that code knows its settings, or lacks one whose canary value is what code before the
setting did (``SETTINGS_BEFORE``); the others are listed as not run, with the reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from hcct_lite.runs.canary import CANARIES, canary_config, pinned_env  # noqa: E402
from hcct_lite.runs.store import SETTINGS_BEFORE  # noqa: E402

# Run by each code in its own process: the canaries' settings in, their numbers out.
CHILD = r"""
import dataclasses, json, sys
import torch
torch.set_num_threads(1)
try:  # the package's layout since the subpackages
    from hcct_lite.training.config import RunConfig, make_config
    from hcct_lite.training.engine import run_experiment
except ImportError:  # the flat layout before them
    from hcct_lite.tasks import RunConfig, make_config
    from hcct_lite.engine import run_experiment
spec = json.load(open(sys.argv[1]))
known = {f.name for f in dataclasses.fields(RunConfig)}
keys = ("groups", "client_test_error", "train_loss", "update_cosines", "update_clients")
out = {}
for name, settings in spec["canaries"].items():
    rest = {}
    for k, v in settings.items():
        if k in ("task", "scheme", "seed"):
            continue
        if k in known:
            rest[k] = v
        elif k not in spec["before"] or spec["before"][k] != v:
            out[name] = {"not_run": f"needs {k}={v!r}, which this code lacks"}
            break
    else:
        try:  # older code may not know a value (a network, a scheme) either
            cfg = make_config(settings["task"], settings["scheme"], settings["seed"], **rest)
            r = run_experiment(cfg, progress=False)
        except (ValueError, KeyError) as err:
            out[name] = {"not_run": f"this code refuses its settings ({err})"}
            continue
        out[name] = [{k: h[k] for k in keys if k in h} for h in r["history"]]
json.dump(out, open(sys.argv[2], "w"))
"""


def _run(code_root: str, spec: dict, tmp: str, tag: str) -> dict:
    spec_path, out = os.path.join(tmp, f"{tag}-spec.json"), os.path.join(tmp, f"{tag}-out.json")
    child = os.path.join(tmp, "child.py")
    with open(child, "w") as f:
        f.write(CHILD)
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    env = dict(pinned_env(), PYTHONPATH=code_root)
    proc = subprocess.run([sys.executable, child, spec_path, out], env=env, cwd=tmp,
                          capture_output=True, text=True)  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"{tag}: the canaries failed: {proc.stderr.strip().splitlines()[-1]}")
    with open(out) as f:
        return json.load(f)


def _cosine_gap(a: list, b: list) -> float:
    """The largest difference between two histories' update cosines (0 where none)."""
    gaps = [abs(u - v) for x, y in zip(a, b, strict=False)
            for row_x, row_y in zip(x.get("update_cosines") or [], y.get("update_cosines") or [],
                                    strict=False)
            for u, v in zip(row_x, row_y, strict=False)]  # fmt: skip
    return max(gaps, default=0.0)


def _differing(a: list, b: list) -> set:
    """The keys whose numbers differ in some epoch, of those both histories have."""
    if len(a) != len(b):
        return {"epochs"}
    return {k for x, y in zip(a, b, strict=True) for k in set(x) & set(y) if x[k] != y[k]}


def main(commits) -> int:
    where = {"device", "data_root", "download"}
    spec = {
        "canaries": {
            n: {k: v for k, v in canary_config(n).to_dict().items() if k not in where}
            for n in CANARIES
        },
        # record_cosines only records (the cosines are compared where both codes write them)
        "before": {
            "record_cosines": True,
            **{k: v for k, (v, _commit, _why) in SETTINGS_BEFORE.items()},
        },
    }
    bad = 0
    with tempfile.TemporaryDirectory(prefix="hcct-canary-commits-") as tmp:
        today = _run(ROOT, spec, tmp, "today")
        for commit in commits:
            code = os.path.join(tmp, commit)
            os.makedirs(code)
            archive = subprocess.run(["git", "-C", ROOT, "archive", commit, "hcct_lite"],
                                     capture_output=True, check=True).stdout  # fmt: skip
            subprocess.run(["tar", "-x", "-C", code], input=archive, check=True)
            old = _run(code, spec, tmp, commit)
            diffs = {n: _differing(old[n], today[n]) for n in CANARIES if isinstance(old[n], list)}
            same = [n for n, d in diffs.items() if not d]
            differ = [f"{n} ({', '.join(sorted(d))})" for n, d in diffs.items() if d]
            gap = max((_cosine_gap(old[n], today[n]) for n in diffs), default=0.0)
            skipped = {n: old[n]["not_run"] for n in CANARIES if isinstance(old[n], dict)}
            bad += len(differ)
            keys = sorted({k for n in diffs for h in old[n] for k in h})
            print(f"{commit}: {len(same)} canaries give today's numbers, {len(differ)} differ"
                  + (f" ({', '.join(differ)})" if differ else "")
                  + f", {len(skipped)} not run; compared per epoch: {', '.join(keys)}; "
                  f"largest update-cosine difference {gap:.1e}")  # fmt: skip
            for n, why in skipped.items():
                print(f"  not run: {n}: {why}")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    raise SystemExit(main(sys.argv[1:]))
