"""The final assessment graded by otter-grader: its key, three graded submissions (all right,
half right, blank), and a students' kit in which a text search finds no answer of 06."""

import csv
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from assessment import SOURCE, autograder_zip, build_assessment, write_kit  # noqa: E402
from make_classroom import student_edition  # noqa: E402

import hcct_lite as hl  # noqa: E402


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """otter assign on the keyed source, and the kit with every student edition."""
    out = tmp_path_factory.mktemp("classroom")
    key = build_assessment(out / "assessment")
    student = out / "student"
    student.mkdir()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nbformat.write(student_edition(nbformat.read(path, as_version=4)), student / path.name)
    (student / "06_assessment.ipynb").write_bytes(
        (out / "assessment" / "student" / "06_assessment.ipynb").read_bytes()
    )
    return out, key, write_kit(out, student)


def _runs(grid):
    return [json.loads(p.read_text()) for p in sorted((ROOT / "results" / grid).glob("*.json"))]


def test_the_key_is_what_the_questions_ask_computed_another_way(built):
    _, key, _ = built
    # 1: two clients of 50 and 200 samples, equal norms, cosine 0.6, by hand
    g = np.array([[1.0, 0.0], [0.6, 0.8]])
    mean = (50 * g[0] + 200 * g[1]) / 250
    sim = sum(v @ mean / (np.linalg.norm(v) * np.linalg.norm(mean)) for v in g) - 2
    assert key["answer_1"] == pytest.approx(-sim / (1 / 50 + 1 / 200 - 2 / 250))
    # 2: 4/(0.1 D) + 0.05 < 4/15, the smallest whole D
    assert key["answer_2"] == math.floor(40 / (4 / 15 - 0.05)) + 1
    # 3: a fine sweep finds the three clusters just below the key and not just above
    u, d, truth = hl.clustered_updates([2, 2, 2], dim=500, noise=0.5, seed=4)
    right = sorted(np.flatnonzero(truth == c).tolist() for c in range(3))
    found = {
        a: sorted(map(sorted, hl.client_partition(u, d, a).groups)) == right
        for a in (key["answer_3"] - 0.02, key["answer_3"] + 0.02)
    }
    assert list(found.values()) == [True, False]
    # 4: the sums written out
    table3 = np.cumsum([0.1 * 0.995 ** (t - 1) for t in range(1, 1000)])
    assert key["answer_4"] == 1 + int(np.argmax(0.05 * np.arange(1, 1000) > table3))
    # 5 and 6: straight from the shipped result files
    final = {
        s: np.mean([r["final"]["mean"] for r in _runs("schemes-fmnist") if r["scheme"] == s])
        for s in ("hcct", "global")
    }
    assert key["answer_5"] == pytest.approx(final["hcct"] - final["global"])
    by_k = {}
    for r in _runs("fixed-k-digit"):
        by_k.setdefault(r["config"]["fixed_groups"], []).append(r["final"]["mean"])
    means = {k: np.mean(v) for k, v in by_k.items()}
    assert key["answer_6"] == [min(means, key=means.get), max(by_k)]  # utility: K = N


def _submission(student: Path, answers: dict, out: Path, prelude: str = "") -> Path:
    nb = nbformat.read(student, as_version=4)
    for cell in nb.cells:
        found = re.fullmatch(r"answer_(\d) = \.\.\.", cell.source.strip())
        if cell.cell_type == "code" and found and int(found.group(1)) in answers:
            cell.source = f"answer_{found.group(1)} = {answers[int(found.group(1))]}"
    code = [c for c in nb.cells if c.cell_type == "code"]
    code[0].source += prelude
    nbformat.write(nb, out)
    return out


def test_three_submissions_are_graded_full_half_and_zero_marks(built, tmp_path):
    out, key, _ = built
    student = out / "assessment" / "student" / "06_assessment.ipynb"
    k = {i: key[f"answer_{i}"] for i in range(1, 7)}
    right = {  # as students type them: text, NumPy scalars and arrays, a tuple, rounded
        1: f'"{k[1]:.1f}"',
        2: f"np.int64({k[2]})",
        3: f"np.float32({k[3]:.2f})",
        4: f"{k[4]}.0",
        5: f"np.array([{k[5]:.2f}])",
        6: f"({k[6][0]}, {k[6][1]})",
    }
    half = {**right, 2: k[2] - 1, 4: '"three hundred and twenty"', 6: list(reversed(k[6]))}
    # a liar: the judge replaced in the student's kernel; the hidden tests read it afresh
    liar = "\nimport hcct_lite.lessons.checks as _c\n_c.judge = lambda *a, **kw: True\n"
    paths = [
        _submission(student, right, tmp_path / "all-right.ipynb"),
        _submission(student, half, tmp_path / "half-right.ipynb", prelude=liar),
        _submission(student, {}, tmp_path / "blank.ipynb"),
    ]
    grades = tmp_path / "grades.csv"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "assessment.py"),
            "grade",
            str(autograder_zip(out / "assessment")),
            *map(str, paths),
            "--csv",
            str(grades),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {r["submission"]: r for r in csv.DictReader(grades.open())}
    totals = {name: (float(r["total"]), float(r["possible"])) for name, r in rows.items()}
    assert totals == {"all-right.ipynb": (6, 6), "half-right.ipynb": (3, 6), "blank.ipynb": (0, 6)}
    assert [float(rows["half-right.ipynb"][f"q{i}"]) for i in range(1, 7)] == [1, 0, 1, 0, 1, 0]


def test_the_student_edition_has_questions_and_answer_cells_only(built):
    out, key, _ = built
    nb = nbformat.read(out / "assessment" / "student" / "06_assessment.ipynb", as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    answers = re.findall(r"^answer_(\d) = (.*)$", text, re.M)
    assert answers == [(str(i), "...") for i in range(1, 7)]
    for word in (
        "SOLUTION",
        "BEGIN TESTS",
        "hidden",
        "test_q",
        "judge",
        "KEY",
        "make classroom",
        "instructor",
        "solution",
        "answer key",
        "otter",
    ):
        assert word not in text, word
    assert text.count("_Type your answer here, replacing this text._") == 6  # the explanations


def _texts(folder: Path):
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.suffix != ".zip":
            yield path, path.read_bytes().decode("utf-8", errors="ignore")


def test_a_text_search_of_the_students_kit_finds_no_answer_of_06(built):
    out, key, kit = built
    assert sorted(p.name for p in kit.iterdir()) == [
        "README.md",
        "environment.yml",
        "hcct_lite",
        "notebooks",
        "pyproject.toml",
        "results",
    ]
    assert (out / "student-kit.zip").is_file()
    # each decimal answer as it would be printed, to three significant digits and more (a
    # shorter number, such as 0.82, is in any table: the paper's Table II has a std of 0.82)
    numbers = [
        f"{key[name]:.{d}f}"
        for name, low in (("answer_1", 1), ("answer_3", 1), ("answer_5", 3))
        for d in range(low, low + 3)
    ]
    pattern = re.compile(
        r"(?<![\d.])(?:" + "|".join(map(re.escape, numbers)) + r")(?!\d)"
        r"|answer_\d\s*=\s*(?!\.\.\.)\S|# BEGIN QUESTION|BEGIN TESTS|test_q\d|autograder"
        r"|docs/solutions|06_assessment\.md|\"06\.\d\""
    )
    hits = [
        (str(p.relative_to(kit)), m.group(0))
        for p, text in _texts(kit)
        for m in pattern.finditer(text)
    ]
    assert not hits, hits[:10]
    searched = sum(1 for _ in _texts(kit))
    assert searched > 500  # the package, the notebooks and every shipped result were read


def test_the_source_is_otters_format_with_one_hidden_test_per_question():
    nb = nbformat.read(SOURCE, as_version=4)
    raw = [c.source for c in nb.cells if c.cell_type == "raw"]
    assert raw[0].startswith("# ASSIGNMENT CONFIG")
    names = [re.search(r"name: (\S+)", r).group(1) for r in raw if r.startswith("# BEGIN QUESTION")]
    assert names == [n for i in range(1, 7) for n in (f"q{i}", f"q{i}_why")]
    tests = [c.source for c in nb.cells if "BEGIN TEST CONFIG" in c.source]
    assert len(tests) == 6 and all("hidden: true" in t and "KEY" in t for t in tests)


def test_grading_names_a_missing_submission(built, tmp_path):
    from assessment import grade

    out, _, _ = built
    with pytest.raises(SystemExit, match="no submission .*nope.ipynb"):
        grade(autograder_zip(out / "assessment"), [tmp_path / "nope.ipynb"])
