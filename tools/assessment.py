"""The final assessment (notebook 06) through otter-grader, and the students' kit.

    python tools/assessment.py OUT                          # make classroom's part for 06
    python tools/assessment.py grade ZIP SUBMISSION ... [--csv GRADES]   # make grade

``docs/solutions/06_assessment.ipynb`` is the assessment's source in otter-grader's format:
each question's solution and a hidden test whose right answer reads ``KEY``. The build

1. runs the source's code (its solutions) in a fresh Python process in shipped mode and
   reads ``answer_1`` ... ``answer_6``: the key, computed from the shipped results;
2. writes each answer into its question's hidden test in place of ``KEY``;
3. runs ``otter assign``: ``OUT/assessment/student/`` (the questions, no solution, no
   test) and ``OUT/assessment/autograder/`` (the solutions and the autograder zip, whose
   hidden tests ``otter run`` uses to grade a submission on the teacher's machine).

:func:`write_kit` then writes the folder a teacher hands out, ``OUT/student-kit/``, and the
same as a zip: the package, the shipped results and the student editions of every
notebook, nothing else (no ``docs/``: no solution, no answer of 06, no hidden test).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

__all__ = ["SOURCE", "answer_key", "build_assessment", "grade", "write_kit", "main"]

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "docs" / "solutions" / "06_assessment.ipynb"
NAME = "06_assessment.ipynb"
QUESTION = re.compile(r"^# BEGIN QUESTION\s*\nname:\s*(q\d+)\s*$", re.M)
# the package, its metadata and the shipped results: what a student's kernel needs
KIT = ("hcct_lite", "results", "pyproject.toml", "environment.yml", "LICENSE")
KIT_README = """# hcct-lite: the notebooks

    python -m venv .venv && .venv/bin/pip install -e .     # or: conda env create -f environment.yml
    .venv/bin/jupyter lab notebooks/

Work through notebooks 01 to 05: each exercise has a check cell that tells you at once
whether your answer is right, with a hint when it is not. Notebook 06 is the final
assessment: your teacher grades the notebook you hand in. The notebooks read the
paper-scale runs in `results/` (HCCT_MODE=shipped, the default).
"""


def _source_code(nb) -> str:
    """The code a run of the source executes: every code cell outside the tests."""
    code, in_tests = [], False
    for cell in nb.cells:
        if cell.cell_type == "raw":
            text = cell.source.strip()
            in_tests = text.startswith("# BEGIN TESTS") or (
                in_tests and not text.startswith("# END TESTS")
            )
        elif cell.cell_type == "code" and not in_tests:
            code.append(cell.source)
    return "\n\n".join(code)


_PLAIN = """
import json, numpy as np
def plain(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (list, tuple, np.ndarray)):
        return [plain(x) for x in v]
    return v
print("KEY:" + json.dumps({k: plain(v) for k, v in sorted(globals().items())
                           if k.startswith("answer_")}))
"""


def answer_key(source: Path = SOURCE) -> dict:
    """``{"answer_1": ..., ...}``: the source's solutions run in a fresh shipped-mode process."""
    nb = nbformat.read(source, as_version=4)
    env = dict(os.environ, HCCT_MODE="shipped", MPLBACKEND="Agg")
    done = subprocess.run(
        [sys.executable, "-c", _source_code(nb) + _PLAIN],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise SystemExit(f"{source}: its solutions failed in shipped mode:\n{done.stderr[-3000:]}")
    line = next(x for x in done.stdout.splitlines() if x.startswith("KEY:"))
    return json.loads(line[4:])


def _with_key(nb, key: dict):
    """A copy of the source with each hidden test's ``KEY`` replaced by its answer."""
    out, question = nbformat.from_dict(json.loads(json.dumps(nb))), None
    for cell in out.cells:
        found = QUESTION.search(cell.source) if cell.cell_type == "raw" else None
        question = found.group(1) if found else question
        if cell.cell_type == "code" and "KEY" in cell.source:
            answer = key.get(f"answer_{question[1:]}")
            if answer is None:
                raise SystemExit(f"{SOURCE.name}: question {question} has no answer_{question[1:]}")
            cell.source = re.sub(r"\bKEY\b", repr(answer), cell.source)
    return out


def build_assessment(out: Path, source: Path = SOURCE) -> dict:
    """Run otter assign on the keyed source into ``out``; return the key it used."""
    key = answer_key(source)
    out.mkdir(parents=True, exist_ok=True)
    keyed = out / NAME
    nbformat.write(_with_key(nbformat.read(source, as_version=4), key), keyed)
    done = subprocess.run(
        [sys.executable, "-m", "otter", "assign", "--no-pdfs", NAME, "."],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=600,
    )
    keyed.unlink()
    if done.returncode != 0:
        raise SystemExit(f"otter assign failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    shutil.rmtree(out / "student" / "tests", ignore_errors=True)  # public tests: none
    return key


def autograder_zip(out: Path) -> Path:
    """The autograder zip ``otter assign`` wrote into ``out/autograder``."""
    (zip_path,) = sorted((out / "autograder").glob("*-autograder_*.zip"))
    return zip_path


def write_kit(out: Path, student_notebooks: Path) -> Path:
    """Write the students' kit into ``out/student-kit/`` and ``out/student-kit.zip``."""
    kit = out / "student-kit"
    shutil.rmtree(kit, ignore_errors=True)
    kit.mkdir(parents=True)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "*.egg-info")
    for name in KIT:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, kit / name, ignore=skip)
        elif path.is_file():
            shutil.copy2(path, kit / name)
    (kit / "README.md").write_text(KIT_README)
    shutil.copytree(student_notebooks, kit / "notebooks", ignore=skip)
    shutil.make_archive(str(out / "student-kit"), "zip", out, "student-kit")
    return kit


def grade(autograder: Path, submissions: list, csv: Path | None = None) -> list:
    """Grade each submitted notebook with ``otter run`` (no container); one row each.

    A row is ``[submission, score of q1, ..., total, possible]``; ``csv`` also gets the
    rows. The students' notebooks run on this machine, in this environment: grade only
    notebooks you received from your students, and read any that scores oddly.
    """
    from otter.run import main as otter_run

    rows = []
    for path in map(Path, submissions):
        if not path.is_file():
            raise SystemExit(f"no submission {path}")
        result = otter_run(str(path), autograder=str(autograder), output_dir=None, no_logo=True)
        scores = [result.get_score(q) for q in sorted(result.test_files)]
        rows.append([path.name, *scores, result.total, result.possible])
        print(f"{path.name}: {result.total:g} of {result.possible:g}", flush=True)
    if csv is not None:
        names = sorted(result.test_files) if rows else []
        lines = [",".join(["submission", *names, "total", "possible"])]
        lines += [",".join(map(str, row)) for row in rows]
        Path(csv).write_text("\n".join(lines) + "\n")
    return rows


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["grade"]:
        if len(args) < 3:
            raise SystemExit("usage: assessment.py grade AUTOGRADER.zip SUBMISSION ... [--csv F]")
        csv = None
        if "--csv" in args:
            at = args.index("--csv")
            csv, args = Path(args[at + 1]), args[:at] + args[at + 2 :]
        grade(Path(args[1]), args[2:], csv)
        return 0
    out = Path(args[0]) if args else ROOT / "classroom"
    key = build_assessment(out / "assessment")
    print(f"wrote {out / 'assessment'}: {len(key)} answers in the hidden tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
