"""The final assessment (notebook 06): its student edition, each student's key, the kit.

    python tools/assessment.py OUT                     # make classroom's part for 06
    python tools/assessment.py grade SUBMISSION ... [--csv GRADES] [--timeout S] [--total S]
    python tools/assessment.py key STUDENT_ID          # one student's numbers and key

``docs/solutions/06_assessment.ipynb`` is the assessment's source in otter-grader's format:
six questions, each with its solution. ``otter assign`` turns it into the student edition
(no solution) and the solved edition. Each student writes their id in the first code cell;
:func:`hcct_lite.lessons.assessment.assessment_variant` draws their numbers from it, and
:func:`answer_key` computes their key here, with the functions the solutions call. This
file is not in the kit, so no student has the keys. ``grade`` runs ``tools/grading.py``.

:func:`write_kit` writes the folder a teacher hands out, ``OUT/student-kit/``, and the same
as a zip: the package, the shipped results and the student editions of every notebook,
nothing else (no ``docs/``, no ``tools/``: no solution and no key).
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

import hcct_lite as hl
from hcct_lite.lessons.assessment import assessment_variant
from hcct_lite.lessons.modes import Mode

__all__ = [
    "SOURCE",
    "EXAMPLE_ID",
    "QUESTIONS",
    "answer_key",
    "build_assessment",
    "with_student_id",
    "write_kit",
    "main",
]

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "docs" / "solutions" / "06_assessment.ipynb"
NAME = "06_assessment.ipynb"
EXAMPLE_ID = "example"  # the id of the instructor edition's worked answers
# how each computed answer is judged: the kind and decimals of checks.judge
QUESTIONS = {
    1: ("number", 1),
    2: ("integer", None),
    3: ("number", 1),
    4: ("integer", None),
    5: ("number", 2),
    6: ("sequence", None),
}
ID_LINE = re.compile(r"^student_id\s*=\s*(['\"]).*?\1", re.M)
# the package, its metadata and the shipped results: what a student's kernel needs
KIT = ("hcct_lite", "results", "pyproject.toml", "environment.yml", "LICENSE")
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "*.egg-info")
KIT_README = """# hcct-lite: the notebooks

    python -m venv .venv && .venv/bin/pip install -e .     # or: conda env create -f environment.yml
    .venv/bin/jupyter lab notebooks/

Work through notebooks 01 to 05: each exercise has a check cell that tells you at once
whether your answer is right, with a hint when it is not. Notebook 06 is the final
assessment: write your student id in its first code cell; your teacher grades the notebook
you hand in. The notebooks read the paper-scale runs in `results/` (HCCT_MODE=shipped, the
default).
"""


# --- the keys: trusted code, the same library functions the solutions call -------------


def key_1(q) -> float:
    """The alpha above which merging the two clients of ``q`` (a ``Q1``) pays."""
    updates = np.array([[1.0, 0.0], [q.cosine, math.sqrt(1.0 - q.cosine**2)]])
    sim, data = hl.benefit_parts(updates, list(q.sizes), [0], [1])
    return -sim / data


def key_2(q) -> int:
    """The smallest group size whose join strictly lowers the bound of ``q`` (a ``Q2``)."""
    sizes = np.arange(1, 100_000)
    gains = hl.join_gain(q.samples, sizes, q.divergence, delta=q.delta)
    if not (gains > 0).any():
        raise ValueError(f"{q}: no group size pays")
    return int(sizes[np.argmax(gains > 0)])


def q3_updates(q):
    """The updates, sizes and true groups of ``q`` (a ``Q3``)."""
    updates, sizes, truth = hl.clustered_updates(
        list(q.clusters), dim=q.dim, noise=q.noise, seed=q.seed
    )
    groups = sorted(np.flatnonzero(truth == c).tolist() for c in np.unique(truth))
    return updates, sizes, groups


def q3_finds(q, alphas) -> list:
    """Whether Algorithm 2 returns exactly the true clusters of ``q`` at each alpha."""
    updates, sizes, groups = q3_updates(q)
    return [
        sorted(map(sorted, hl.client_partition(updates, sizes, float(a)).groups)) == groups
        for a in alphas
    ]


Q3_SCAN = np.geomspace(1.0, 1000.0, 61)


def key_3(q) -> float:
    """The alpha above which Algorithm 2 stops returning the true clusters of ``q``."""
    found = q3_finds(q, Q3_SCAN)
    if not any(found) or found[-1]:
        raise ValueError(f"{q}: no bracket in alpha = 1 .. 1000")
    last = max(i for i, f in enumerate(found) if f)
    low, high = float(Q3_SCAN[last]), float(Q3_SCAN[last + 1])
    while high - low > 1e-6:
        mid = (low + high) / 2
        low, high = (mid, high) if q3_finds(q, [mid])[0] else (low, mid)
    return high


def key_4(q) -> int:
    """The first T at which the constant rate of ``q`` (a ``Q4``) sums more than Table III's."""
    for t in range(1, 100_000):
        if hl.learning_rate_sum(t, lr=q.rate, decay=1.0) > hl.learning_rate_sum(t):
            return t
    raise ValueError(f"{q}: never larger")


@functools.cache
def _scheme_runs(task: str) -> tuple:
    return tuple(hl.scheme_runs(Mode("shipped"), task))


@functools.cache
def _grid_runs(grid: str) -> tuple:
    return tuple(hl.grid_runs(Mode("shipped"), grid))


def q5_finals(q) -> dict:
    """``scheme -> (mean, std)`` of the final-epoch mean error over the seeds of ``q``."""
    stats = hl.by_scheme([r for r in _scheme_runs(q.task) if r["seed"] in q.seeds])
    return {scheme: s[0][:2] for scheme, s in stats.items()}


def key_5(q) -> float:
    """HCCT's final-epoch mean error minus the other scheme's, over the seeds of ``q``."""
    finals = q5_finals(q)
    return finals["hcct"][0] - finals[q.other][0]


def q6_summary(q) -> tuple:
    """``(ks, errors, utilities)`` of ``q``'s grid at its N, over its seeds."""
    runs = [r for r in _grid_runs(q.grid) if r["seed"] in q.seeds]
    return hl.fixed_k_summary(runs)[q.n_clients]


def key_6(q) -> list:
    """``[K of the lowest mean error, K of the highest total utility]`` for ``q``."""
    ks, errors, utilities = q6_summary(q)
    return [int(ks[int(np.argmin(errors))]), int(ks[int(np.argmax(utilities))])]


def answer_key(student_id: str) -> dict:
    """``{"answer_1": ..., ..., "answer_6": ...}``: the key of ``student_id``'s variant."""
    v = assessment_variant(student_id)
    keys = (key_1(v.q1), key_2(v.q2), key_3(v.q3), key_4(v.q4), key_5(v.q5), key_6(v.q6))
    return {f"answer_{i}": k for i, k in enumerate(keys, 1)}


# --- the editions -------------------------------------------------------------------------


def build_assessment(out: Path, source: Path = SOURCE) -> None:
    """Run ``otter assign`` on the source into ``out``: ``student/`` and ``autograder/``.

    ``out/student/06_assessment.ipynb`` holds the questions and no solution;
    ``out/autograder/06_assessment.ipynb`` the solutions (the instructor edition, once
    given an id by :func:`with_student_id`). Otter's own autograder zip is not used.
    """
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, out / NAME)
    done = subprocess.run(
        [sys.executable, "-m", "otter", "assign", "--no-pdfs", NAME, "."],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=600,
    )
    (out / NAME).unlink()
    if done.returncode != 0:
        raise SystemExit(f"otter assign failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    for leftover in (out / "autograder").glob("*.zip"):
        leftover.unlink()
    for folder in ("student", "autograder"):
        shutil.rmtree(out / folder / "tests", ignore_errors=True)


def with_student_id(nb, student_id: str):
    """A copy of ``nb`` whose ``student_id = "..."`` line holds ``student_id``."""
    out, line = copy.deepcopy(nb), f"student_id = {json.dumps(student_id)}"
    for cell in out.cells:
        if cell.cell_type == "code" and ID_LINE.search(cell.source):
            cell.source = ID_LINE.sub(lambda _: line, cell.source, count=1)
            return out
    raise ValueError('the notebook has no line student_id = "..."')


def write_kit(out: Path, student_notebooks: Path) -> Path:
    """Write the students' kit into ``out/student-kit/`` and ``out/student-kit.zip``."""
    kit = out / "student-kit"
    shutil.rmtree(kit, ignore_errors=True)
    kit.mkdir(parents=True)
    for name in KIT:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, kit / name, ignore=SKIP)
        elif path.is_file():
            shutil.copy2(path, kit / name)
    (kit / "README.md").write_text(KIT_README)
    shutil.copytree(student_notebooks, kit / "notebooks", ignore=SKIP)
    shutil.make_archive(str(out / "student-kit"), "zip", out, "student-kit")
    return kit


USAGE = """usage: assessment.py [FOLDER]            write the assessment's editions (classroom/)
       assessment.py key STUDENT_ID     print a student's variant and its key
       assessment.py grade SUBMISSION... [--csv F] [--timeout S] [--unisolated]"""


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["grade"]:
        parser = argparse.ArgumentParser(prog="assessment.py grade")
        parser.add_argument("submissions", nargs="+", metavar="SUBMISSION")
        parser.add_argument("--csv", type=Path, help="write the grades here")
        parser.add_argument("--timeout", type=int, default=120, help="seconds per cell")
        parser.add_argument("--total", type=int, default=1800, help="seconds per notebook")
        parser.add_argument("--checkout", type=Path, help="the checkout to watch (this one)")
        parser.add_argument(
            "--unisolated",
            action="store_true",
            help="grade where kernels cannot run isolated: a submission can change your files",
        )
        opts = parser.parse_args(args[1:])
        from grading import grade

        rows = grade(
            opts.submissions,
            opts.csv,
            opts.timeout,
            opts.total,
            opts.checkout,
            isolate=not opts.unisolated,
        )
        return 1 if any(r["flagged"].startswith("not graded") for r in rows) else 0
    if args[:1] == ["key"]:
        if len(args) != 2:
            raise SystemExit("usage: assessment.py key STUDENT_ID")
        print(assessment_variant(args[1]))
        for name, value in answer_key(args[1]).items():
            print(f"{name} = {value!r}")
        return 0
    if args[:1] in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    if len(args) > 1 or (args and args[0].startswith("-")):
        raise SystemExit(f"assessment.py: cannot read {' '.join(args)!r}\n{USAGE}")
    out = Path(args[0]) if args else ROOT / "classroom"
    build_assessment(out / "assessment")
    print(f"wrote {out / 'assessment'}: the student and solved editions of 06")
    return 0


if __name__ == "__main__":
    sys.exit(main())
