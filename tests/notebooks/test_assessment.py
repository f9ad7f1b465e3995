"""The final assessment: each student's own numbers and key, and grading that a submission
cannot game. A class of honest, wrong, blank and tampering submissions is graded as
``make grade`` grades it; the checkout is the same afterwards."""

import csv
import hashlib
import json
import math
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import nbformat
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import assessment as tool  # noqa: E402
import grading  # noqa: E402
import grading_kernel  # noqa: E402
import grading_sandbox  # noqa: E402
from assessment import (  # noqa: E402
    EXAMPLE_ID,
    SOURCE,
    answer_key,
    build_assessment,
    with_student_id,
    write_kit,
)
from grading import grade, read_student_id  # noqa: E402
from make_classroom import student_edition  # noqa: E402

import hcct_lite as hl  # noqa: E402
from hcct_lite.lessons import assessment as variants  # noqa: E402

IDS = ["s1001", "s1002"]  # two students whose six questions and keys all differ


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """otter assign on the source, and the kit with every student edition."""
    out = tmp_path_factory.mktemp("classroom")
    build_assessment(out / "assessment")
    student = out / "student"
    student.mkdir()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nbformat.write(student_edition(nbformat.read(path, as_version=4)), student / path.name)
    (student / "06_assessment.ipynb").write_bytes(
        (out / "assessment" / "student" / "06_assessment.ipynb").read_bytes()
    )
    return out, write_kit(out, student)


def _runs(grid):
    return [json.loads(p.read_text()) for p in sorted((ROOT / "results" / grid).glob("*.json"))]


# --- the variants and their keys ----------------------------------------------------------


@pytest.mark.parametrize("student_id", [EXAMPLE_ID, *IDS, "ab12", "Zoë van Dijk"])
def test_each_key_is_what_its_question_asks_computed_another_way(student_id):
    v, key = hl.assessment_variant(student_id), answer_key(student_id)
    # 1: the summed cosines to the weighted mean, by hand
    (d1, d2), c = v.q1.sizes, v.q1.cosine
    g = np.array([[1.0, 0.0], [c, math.sqrt(1 - c * c)]])
    mean = (d1 * g[0] + d2 * g[1]) / (d1 + d2)
    sim = sum(x @ mean / (np.linalg.norm(x) * np.linalg.norm(mean)) for x in g) - 2
    assert key["answer_1"] == pytest.approx(-sim / (1 / d1 + 1 / d2 - 2 / (d1 + d2)))
    # 2: 4/(delta D_G) + d_1 < 4/(delta D_i), the smallest whole D_G
    q2 = v.q2
    own = 4 / (q2.delta * q2.samples)
    assert key["answer_2"] == math.floor(4 / (q2.delta * (own - q2.divergence))) + 1
    # 3: found just below the key, lost just above
    assert tool.q3_finds(v.q3, [key["answer_3"] - 0.02, key["answer_3"] + 0.02]) == [True, False]
    # 4: the sums written out, the first epoch at 0.1
    table3 = np.cumsum([0.1 * 0.995 ** (t - 1) for t in range(1, 5000)])
    rate = v.q4.rate * np.arange(1, 5000)
    assert key["answer_4"] == 1 + int(np.argmax(rate > table3))
    # 5: straight from the result files
    runs = [r for r in _runs(f"schemes-{v.q5.task}") if r["seed"] in v.q5.seeds]
    final = {
        s: np.mean([r["final"]["mean"] for r in runs if r["scheme"] == s])
        for s in ("hcct", v.q5.other)
    }
    assert key["answer_5"] == pytest.approx(final["hcct"] - final[v.q5.other])
    # 6: the files' final errors and utilities, by K
    q6 = v.q6
    by_k = {}
    for r in _runs(q6.grid):
        c = r["config"]
        if c["n_clients"] == q6.n_clients and r["seed"] in q6.seeds:
            utility = [h["total_utility"] for h in r["history"] if "total_utility" in h][-1]
            by_k.setdefault(c["fixed_groups"], []).append((r["final"]["mean"], utility))
    means = {k: np.mean(v, axis=0) for k, v in by_k.items()}
    assert key["answer_6"] == [
        min(means, key=lambda k: means[k][0]),
        max(means, key=lambda k: means[k][1]),
    ]


def test_every_variant_that_can_be_drawn_has_one_well_defined_answer():
    # 1: every pair of sizes and cosine: a positive, finite alpha
    for d1 in variants.Q1_SMALL:
        for d2 in variants.Q1_LARGE:
            for c in variants.Q1_COSINES:
                assert 0 < tool.key_1(variants.Q1((d1, d2), c)) < 1000
    # 2: the gain changes sign clearly at the key; the pairs left out are those where not
    for d in variants.Q2_SAMPLES:
        for div in variants.Q2_DIVERGENCES:
            q = variants.Q2(d, div)
            boundary = 4 / (q.delta * (4 / (q.delta * d) - div))
            whole = abs(boundary - round(boundary)) < 1e-6
            assert whole == ((d, div) in variants.Q2_SKIP), (d, div)
            if not whole:
                k = tool.key_2(q)
                gains = hl.join_gain(d, np.array([k - 1, k]), div, delta=q.delta)
                assert gains[0] < -1e-9 and gains[1] > 1e-9 and k < 5000
    # 3: the true clusters are found on one interval of alpha, inside the scan, whose end
    # the key is
    scan = np.geomspace(1.0, 1000.0, 121)
    for noise in variants.Q3_NOISES:
        for seed in variants.Q3_SEEDS:
            q = variants.Q3((2, 2, 2), 500, noise, seed)
            found = np.flatnonzero(tool.q3_finds(q, scan))
            assert found.size and found[-1] - found[0] + 1 == found.size, q
            assert 0 < found[0] and found[-1] < scan.size - 1, q
            end = tool.key_3(q)
            assert scan[found[-1]] < end <= scan[found[-1] + 1], q
    # 4: the two sums are never within float noise of each other at the boundary
    for rate in variants.Q4_RATES:
        t = tool.key_4(variants.Q4(rate))
        assert rate * t - hl.learning_rate_sum(t) > 1e-9
        assert rate * (t - 1) - hl.learning_rate_sum(t - 1) < -1e-9
    # 5: a difference clear of 0 and of the all-seed difference notebook 04 prints, except
    # for the choices left out
    every = (0, 1, 2, 3, 4)
    for task in variants.Q5_TASKS:
        for other in variants.Q5_OTHERS:
            shown = tool.key_5(variants.Q5(task, other, every))
            for seeds in variants.Q5_SEEDS:
                diff = tool.key_5(variants.Q5(task, other, seeds))
                clear = abs(diff) >= 0.05 and abs(diff - shown) > 0.02
                assert clear != ((task, other, seeds) in variants.Q5_SKIP), (task, other, seeds)
    # 6: the lowest error and the highest utility 0.02 clear of the next K, and the lowest
    # error at another K than over every seed
    for grid, n, seeds in variants.Q6_CHOICES:
        ks, errors, utilities = tool.q6_summary(variants.Q6(grid, n, seeds))
        assert np.diff(sorted(errors)[:2])[0] >= 0.02 and np.diff(sorted(utilities)[-2:])[0] >= 0.02
        all_ks, all_errors, _ = tool.q6_summary(variants.Q6(grid, n, (0, 1, 2)))
        assert ks[int(np.argmin(errors))] != all_ks[int(np.argmin(all_errors))], (grid, n, seeds)


def test_two_ids_get_other_questions_and_other_keys_and_keys_spread_over_a_class():
    a, b = (hl.assessment_variant(i) for i in IDS)
    ka, kb = (answer_key(i) for i in IDS)
    for k in range(1, 7):
        assert getattr(a, f"q{k}") != getattr(b, f"q{k}"), k
        assert ka[f"answer_{k}"] != kb[f"answer_{k}"], k
    assert hl.assessment_variant(" S1001 ") == a  # case and spaces do not matter
    for wrong in ("", "   ", "...", 1001, None):
        with pytest.raises(ValueError, match="student_id|student id"):
            hl.assessment_variant(wrong)
    # over a class of 200, no question has one key for many students
    keys = [answer_key(f"student-{i:03d}") for i in range(200)]
    for k in range(1, 7):
        values = Counter(json.dumps(key[f"answer_{k}"]) for key in keys)
        assert values.most_common(1)[0][1] <= 40, (k, values.most_common(3))
        assert len(values) >= 10, (k, len(values))


# --- the editions ---------------------------------------------------------------------------


def test_the_source_is_otters_format_with_the_id_first_and_no_key():
    nb = nbformat.read(SOURCE, as_version=4)
    raw = [c.source for c in nb.cells if c.cell_type == "raw"]
    assert raw[0].startswith("# ASSIGNMENT CONFIG")
    names = [re.search(r"name: (\S+)", r).group(1) for r in raw if r.startswith("# BEGIN QUESTION")]
    assert names == [n for i in range(1, 7) for n in (f"q{i}", f"q{i}_why")]
    text = "\n".join(c.source for c in nb.cells)
    assert "BEGIN TESTS" not in text and "KEY" not in text and "judge" not in text
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert first.source.startswith('student_id = "..."')
    for k in range(1, 7):  # each question says how to print its numbers
        assert f"hl.assessment_variant(student_id).q{k})`" in text, k


def test_the_student_edition_has_questions_and_answer_cells_only(built):
    out, _ = built
    nb = nbformat.read(out / "assessment" / "student" / "06_assessment.ipynb", as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    answers = re.findall(r"^answer_(\d) = (.*)$", text, re.M)
    assert answers == [(str(i), "...") for i in range(1, 7)]
    for word in ("SOLUTION", "BEGIN TESTS", "hidden", "test_q", "judge", "KEY", "make classroom"):
        assert word not in text, word
    for word in ("instructor", "solution", "answer key", "otter", "answer_key", "tools/"):
        assert word not in text, word
    assert text.count("_Type your answer here, replacing this text._") == 6  # the explanations
    assert read_student_id(nb) is None  # the placeholder is no id
    assert read_student_id(with_student_id(nb, "s42")) == "s42"


def _printed(key: dict) -> list:
    """Each decimal answer at three decimals and more (a shorter number, such as 46.15, is
    in the paper's tables); each whole number after an = sign, as a solution prints it."""
    numbers = [f"{key[f'answer_{k}']:.{d}f}" for k in (1, 3, 5) for d in (3, 4, 5)]
    numbers += [f"= {key[name]}" for name in ("answer_2", "answer_4")]
    return numbers


def _texts(folder: Path):
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.suffix != ".zip":
            yield path, path.read_bytes().decode("utf-8", errors="ignore")


def test_no_answer_of_06_is_printed_anywhere_a_student_reads(built):
    out, kit = built
    assert sorted(p.name for p in kit.iterdir()) == [
        "README.md",
        "environment.yml",
        "hcct_lite",
        "notebooks",
        "pyproject.toml",
        "results",
    ]
    assert (out / "student-kit.zip").is_file()
    numbers = [n for sid in [EXAMPLE_ID, *IDS] for n in _printed(answer_key(sid))]
    pattern = re.compile(
        r"(?<![\d.])(?:" + "|".join(map(re.escape, numbers)) + r")(?!\d)"
        r"|answer_\d\s*=\s*(?!\.\.\.)\S|# BEGIN QUESTION|BEGIN TESTS|test_q\d|autograder"
        r"|docs/solutions|06_assessment\.md|\"06\.\d\"|def key_\d|answer_key"
    )
    # the kit, and the notebooks as the repository stores them (with their kept outputs)
    texts = [*_texts(kit), *((p, p.read_text()) for p in sorted((ROOT / "notebooks").glob("*")))]
    hits = [(str(p), m.group(0)) for p, text in texts for m in pattern.finditer(text)]
    assert not hits, hits[:10]
    assert len(texts) > 500  # the package, the notebooks and every shipped result were read


# --- grading ----------------------------------------------------------------------------------


def _fill(nb, answers: dict, student_id: str | None, prelude: str = "", after: dict | None = None):
    """A copy of ``nb`` with answers typed in, code added to the first cell, and cells
    inserted after answer cells (``after``: question -> code)."""
    nb = with_student_id(nb, student_id) if student_id else nbformat.from_dict(nb)
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    cells = []
    for cell in nb.cells:
        found = re.fullmatch(r"answer_(\d) = \.\.\.", cell.source.strip())
        k = int(found.group(1)) if cell.cell_type == "code" and found else None
        if k in answers:
            cell.source = f"answer_{k} = {answers[k]}"
        cells.append(cell)
        if k is not None and after and k in after:
            cells.append(nbformat.v4.new_code_cell(after[k]))
    nb.cells = cells
    first = next(c for c in nb.cells if c.cell_type == "code")
    first.source += prelude
    return nb


def _right(student_id: str) -> dict:
    """The key typed as students type it: text, NumPy scalars and arrays, a tuple."""
    k = {i: answer_key(student_id)[f"answer_{i}"] for i in range(1, 7)}
    return {
        1: f'"{k[1]:.1f}"',
        2: f"np.int64({k[2]})",
        3: f"np.float32({k[3]:.2f})",
        4: f"{k[4]}.0",
        5: f"np.array([{k[5]:.2f}])",
        6: f"({k[6][0]}, {k[6][1]})",
    }


def _wrong(student_id: str) -> dict:
    """Each answer's neighbour: just outside the tolerance, one off, the list reversed."""
    k = {i: answer_key(student_id)[f"answer_{i}"] for i in range(1, 7)}
    return {1: k[1] + 0.1, 2: k[2] - 1, 3: k[3] - 0.1, 4: k[4] + 1, 5: k[5] + 0.01, 6: k[6][::-1]}


CHMOD = "import os\nfor _d, _, _f in os.walk({top}):\n    os.chmod(_d, 0o755)\n"
ATTACKS = {
    # the hidden test's reload replaced in the kernel (the first attack of issue 72)
    "reload": "import importlib\nimportlib.reload = lambda m: m\n"
    "import hcct_lite.lessons.checks as _c\n_c.judge = lambda *a, **k: True\n",
    # the judge appended to through its __file__: an editable install's file, once
    "append": "import os, hcct_lite.lessons.checks as _c\n"
    + CHMOD.format(top="os.path.dirname(_c.__file__)")
    + "os.chmod(_c.__file__, 0o644)\n"
    "open(_c.__file__, 'a').write('\\ndef judge(*a, **k):\\n    return True\\n')\n",
    # builtins and the JSON encoder replaced
    "builtins": "import builtins, json\nbuiltins.abs = lambda x: 0\n"
    "builtins.isinstance = lambda *a: True\njson.dumps = lambda *a, **k: '{}'\n",
    # answers that equal anything
    "equal-anything": "class _Yes(float):\n    def __eq__(self, other):\n        return True\n"
    "    __hash__ = float.__hash__\n    def __abs__(self):\n        return 0.0\n"
    "class _All(list):\n    def __eq__(self, other):\n        return True\n",
    # answer files where a grader might look, and a forged marker line
    "fake-files": "import json, os\nfor _p in ('answers.json', 'grades.csv', "
    "os.path.expanduser('~/answers.json')):\n"
    "    open(_p, 'w').write(json.dumps({'total': 6, 'answer_1': 1}))\n"
    "print('HCCT-GRADER-0000:' + json.dumps({'answer_%d' % i: 1 for i in range(1, 7)}))\n"
    "os.makedirs(os.path.expanduser('~/.ipython/profile_default/startup'), exist_ok=True)\n"
    "open(os.path.expanduser('~/.ipython/profile_default/startup/00.py'), 'w')"
    ".write('answer_1 = 1\\n')\n",
    # the shipped results overwritten and a module of the package deleted
    "delete": "import os, glob, hcct_lite\n"
    "_top = os.path.dirname(os.path.dirname(hcct_lite.__file__))\n"
    + CHMOD.format(top="_top")
    + "for _p in glob.glob(_top + '/results/schemes-*/*.json'):\n    os.chmod(_p, 0o644)\n"
    "    open(_p, 'w').write('{}')\n"
    "os.remove(_top + '/hcct_lite/lessons/checks.py')\n",
}


def _sha(paths) -> dict:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if p.is_file()}


def test_a_class_is_graded_and_no_submission_can_game_it(built, tmp_path):
    out, _ = built
    student = nbformat.read(out / "assessment" / "student" / "06_assessment.ipynb", as_version=4)
    solved = nbformat.read(out / "assessment" / "autograder" / "06_assessment.ipynb", as_version=4)
    a, b = IDS
    hand_ins = {
        "honest-a.ipynb": with_student_id(solved, a),  # the solutions, run by the grader
        "honest-b.ipynb": with_student_id(solved, b),
        "typed-b.ipynb": _fill(student, _right(b), b),
        "swapped.ipynb": _fill(student, _right(b), a),  # a's notebook, b's numbers
        "wrong.ipynb": _fill(student, _wrong(a), a),
        "blank.ipynb": _fill(student, {}, a),
        "no-id.ipynb": _fill(student, _right(a), None),
        "loop.ipynb": _fill(student, _right(a), a, after={1: "while True:\n    pass"}),
        "exit.ipynb": _fill(student, _right(a), a, after={2: "import os\nos._exit(0)"}),
    }
    for name, code in ATTACKS.items():
        answers = _wrong(a)
        if name == "equal-anything":
            answers = {k: f"_Yes({v})" for k, v in answers.items() if k != 6} | {6: "_All([0])"}
        hand_ins[f"{name}.ipynb"] = _fill(student, answers, a, prelude="\n" + code)
    hand_ins["after-attacks.ipynb"] = _fill(student, {}, b)  # blank, graded after them all
    hand_ins["honest-last.ipynb"] = with_student_id(solved, a)
    folder = tmp_path / "hand-ins"
    folder.mkdir()
    for name, nb in hand_ins.items():
        nbformat.write(nb, folder / name)
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    tracked = [ROOT / p for p in listed.stdout.decode().split("\0") if p]
    before = _sha(tracked)
    # the grader watches a snapshot of the package's files, which only a submission could
    # change; the test compares the whole checkout itself
    snapshot = tmp_path / "snapshot"
    shutil.copytree(ROOT / "hcct_lite", snapshot / "hcct_lite", ignore=tool.SKIP)
    grades = tmp_path / "grades.csv"
    # where kernels cannot run isolated, the grader refuses unless told to accept it
    (tmp_path / "probe").mkdir()
    isolated = grading_sandbox.unavailable(tmp_path / "probe", []) is None
    done = subprocess.run(  # as make grade runs it
        [
            sys.executable,
            str(ROOT / "tools" / "assessment.py"),
            "grade",
            *(str(folder / n) for n in hand_ins),
            "--csv",
            str(grades),
            "--timeout",
            "30",
            "--checkout",
            str(snapshot),
            *([] if isolated else ["--unisolated"]),
        ],
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = {r["submission"]: r for r in csv.DictReader(grades.open())}
    totals = {name: int(r["total"]) for name, r in rows.items()}
    assert totals == {
        "honest-a.ipynb": 6,
        "honest-b.ipynb": 6,
        "typed-b.ipynb": 6,
        "swapped.ipynb": 0,
        "wrong.ipynb": 0,
        "blank.ipynb": 0,
        "no-id.ipynb": 0,
        "loop.ipynb": 1,  # answer 1 was set before the cell that never ends
        "exit.ipynb": 2,  # answers 1 and 2 were set before the kernel was killed
        **{f"{name}.ipynb": 0 for name in ATTACKS},
        "after-attacks.ipynb": 0,
        "honest-last.ipynb": 6,
    }, done.stdout
    flagged = {name for name, r in rows.items() if r["flagged"]}
    # isolated, the copy is mounted read-only: writing to it fails, and nothing changes
    assert isolated == ("no isolation" not in done.stdout)
    assert flagged == (set() if isolated else {"append.ipynb", "delete.ipynb"}), done.stdout
    for name in flagged:  # by name, in the output and the CSV
        assert "changed its copy of the package" in rows[name]["flagged"]
        assert re.search(rf"^{re.escape(name)} .*FLAGGED: changed its copy", done.stdout, re.M)
    if not isolated:
        assert "checks.py" in rows["append.ipynb"]["flagged"]
    assert "ran past its time" in rows["loop.ipynb"]["notes"]
    assert "the kernel died" in rows["exit.ipynb"]["notes"]
    assert "no student id" in rows["no-id.ipynb"]["notes"]
    assert rows["honest-a.ipynb"]["student_id"] == a and rows["typed-b.ipynb"]["student_id"] == b
    changed = [p for p, h in _sha(tracked).items() if before.get(p) != h]
    assert not changed, f"the checkout changed while grading (or someone edited it): {changed}"


PROBE = (
    "import os, hcct_lite as hl\nanswer_1 = hl.__file__\nanswer_2 = str(hl.results_dir())\n"
    "answer_3 = os.getcwd()\nanswer_4 = os.environ['HOME']\n"
    "answer_5 = oct(os.stat(hl.__file__).st_mode & 0o777)\n"
)


def test_the_kernel_reads_a_read_only_copy_and_changes_outside_it_are_flagged(built, tmp_path):
    out, _ = built
    student = nbformat.read(out / "assessment" / "student" / "06_assessment.ipynb", as_version=4)
    solved = nbformat.read(out / "assessment" / "autograder" / "06_assessment.ipynb", as_version=4)
    # a checkout of its own, so that the test sees only what the submissions change
    checkout = tmp_path / "checkout"
    (checkout / "hcct_lite").mkdir(parents=True)
    (checkout / "hcct_lite" / "checks.py").write_text("# the teacher's file\n")
    target = checkout / "hcct_lite" / "checks.py"
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "the teacher's checkout"], check=True)
    planted = checkout / "planted.txt"  # a new file, which git does not track
    hand_ins = {
        "probe.ipynb": _fill(student, {}, IDS[0], after={6: PROBE}),
        "checkout.ipynb": _fill(
            student, {}, IDS[0], prelude=f"\nopen({str(target)!r}, 'a').write('x = 1\\n')\n"
        ),
        "honest.ipynb": with_student_id(solved, IDS[1]),
        "new-file.ipynb": _fill(
            student, {}, IDS[1], prelude=f"\nopen({str(planted)!r}, 'w').write('x')\n"
        ),
        "pristine.ipynb": _fill(
            student,
            {},
            IDS[0],
            prelude="\nimport os\n_p = os.path.join(os.getcwd(), '..', '..', 'pristine')\n"
            "os.chmod(_p, 0o755)\nopen(os.path.join(_p, 'planted.py'), 'w').write('')\n",
        ),
        "not-graded.ipynb": with_student_id(solved, IDS[0]),
    }
    paths = []
    for name, nb in hand_ins.items():
        nbformat.write(nb, tmp_path / name)
        paths.append(tmp_path / name)
    # not isolated, so that the checks behind the isolation are tried on every system
    rows = {r["submission"]: r for r in grade(paths, timeout=60, root=checkout, isolate=False)}
    probe = rows["probe.ipynb"]["answers"]
    assert probe["answer_1"].endswith("/kit/hcct_lite/__init__.py")
    assert not probe["answer_1"].startswith(str(ROOT))  # not the editable install
    assert probe["answer_2"] == str(Path(probe["answer_1"]).parents[1] / "results")
    assert Path(probe["answer_3"]).name == "work" and Path(probe["answer_4"]).name == "home"
    assert Path(probe["answer_3"]).parent == Path(probe["answer_1"]).parents[2]
    assert probe["answer_5"] == "0o444"  # read-only (for any user but root)
    assert "the checkout changed while it ran: checks.py" in rows["checkout.ipynb"]["flagged"]
    assert rows["honest.ipynb"]["total"] == 6 and not rows["honest.ipynb"]["flagged"]
    assert "the checkout changed while it ran: planted.txt" in rows["new-file.ipynb"]["flagged"]
    assert rows["pristine.ipynb"]["flagged"] == "changed the grader's own copy of the package"
    assert rows["not-graded.ipynb"]["flagged"].startswith("not graded")
    assert rows["not-graded.ipynb"]["total"] == 0


def test_grading_names_a_missing_submission(tmp_path):
    with pytest.raises(SystemExit, match="no submission .*nope.ipynb"):
        grade([tmp_path / "nope.ipynb"])


def test_the_grader_reads_plain_answers_only():
    marker = "M:"
    line = marker + json.dumps(
        {"answer_1": 1.5, "answer_2": [1, "2"], "answer_3": [[1]], "answer_4": True}
    )
    read = grading_kernel.read_answers("noise\n" + line + "\n", marker)
    assert read == {
        "answer_1": 1.5,
        "answer_2": [1, "2"],
        "answer_3": None,
        "answer_4": None,
        "answer_5": None,
        "answer_6": None,
    }
    assert grading_kernel.read_answers(marker + "NaN", marker) is None
    assert grading_kernel.read_answers(marker + '{"answer_1": NaN}', marker)["answer_1"] is None
    assert grading_kernel.read_answers("nothing", marker) is None


def test_two_hand_ins_of_one_id_written_two_ways_are_noted(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('student_id = "S1001"')])
    other = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("student_id = ' s1001 '")])
    third = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('student_id = "s1002"')])
    paths = []
    for name, book in (("a.ipynb", nb), ("b.ipynb", other), ("c.ipynb", third)):
        nbformat.write(book, tmp_path / name)
        paths.append(tmp_path / name)
    rows = [row for *_, row in grading._prepare(paths)]
    noted = [("same id" in row["notes"]) for row in rows]
    assert noted == [True, True, False], rows
    assert rows[0]["student_id"] == "S1001" and rows[1]["student_id"] == "s1001"


def test_grading_refuses_where_kernels_cannot_run_isolated(monkeypatch, tmp_path, capsys):
    nb = tmp_path / "hand-in.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), nb)
    monkeypatch.setattr(grading, "unavailable", lambda base, hidden: "no namespaces here")
    with pytest.raises(SystemExit, match=r"cannot grade isolated here \(no namespaces here\)"):
        grade([nb], root=tmp_path)
    with pytest.raises(SystemExit, match="--unisolated"):
        tool.main(["grade", str(nb)])


def test_the_tool_reads_help_and_refuses_an_option_it_does_not_know(capsys, tmp_path):
    assert tool.main(["--help"]) == 0 and "assessment.py key STUDENT_ID" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="cannot read '--out x'"):
        tool.main(["--out", "x"])
    assert not Path("--help").exists() and not Path("--out").exists()
