"""An installed extension package (docs/example-extension) is seen by every entry point.

It is installed with pip into a temporary folder and put on PYTHONPATH, as a user's
``pip install`` would put it in their environment; nothing of it is imported here.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "example-extension"
CLI = [sys.executable, "-m", "hcct_lite.cli"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The example installed by pip into a folder of its own; the environment that sees it."""
    target, source = tmp_path_factory.mktemp("site"), tmp_path_factory.mktemp("src") / "ext"
    # from a copy: pip's build folder stays out of the checkout
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
        + ["--target", str(target), str(source)],
        check=True,
        capture_output=True,
    )
    env = dict(os.environ, PYTHONPATH=str(target), MPLBACKEND="Agg")
    return env


def _cli(args, env, cwd):
    return subprocess.run(CLI + args, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)


def test_run_compare_and_verify_see_the_extensions_scheme_task_and_network(installed, tmp_path):
    done = _cli(
        ["run", "--task", "breast-cancer", "--scheme", "fedprox", "--fedprox-mu", "0.1"]
        + ["--epochs", "2", "--quiet", "--json", "one.json"],
        installed,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "one.json").read_text())
    assert result["config"]["fedprox_mu"] == 0.1  # the method's setting, in the record
    assert result["provenance"]["compute_version"]["scheme fedprox"] == 1
    assert result["provenance"]["extensions"]["example"] == "hcct-example 0.1.0"
    assert result["domains"] == ["malignant"] * 3 + ["benign"] * 3
    # two worker processes, each finding the extension itself; FedProx at mu = 0 is FedAvg
    done = _cli(
        ["compare", "--task", "breast-cancer", "--schemes", "fedprox", "global", "hcct"]
        + ["--seeds", "0", "1", "--epochs", "5", "--fedprox-mu", "0", "--workers", "2"]
        + ["--out", "grid", "--quiet"],
        installed,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    runs = {p.stem: json.loads(p.read_text()) for p in (tmp_path / "grid").glob("*.json")}
    for seed in (0, 1):
        prox, fedavg = (runs[f"breast-cancer__{s}__seed{seed}"] for s in ("fedprox", "global"))
        for a, b in zip(prox["history"], fedavg["history"], strict=True):
            assert a["client_test_error"] == b["client_test_error"]
            assert a["train_loss"] == b["train_loss"]
        # HCCT groups clients of one label skew only, and some of them together
        groups = runs[f"breast-cancer__hcct__seed{seed}"]["history"][-1]["groups"]
        assert all(set(g) <= {0, 1, 2} or set(g) <= {3, 4, 5} for g in groups), groups
        assert len(groups) < 6, groups
    done = _cli(
        ["verify", "grid/breast-cancer__fedprox__seed1.json", "one.json"], installed, tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("reproduces") == 2, done.stdout


def test_fedprox_pulls_the_clients_towards_their_start(installed, tmp_path):
    code = textwrap.dedent(
        """
        import json, hcct_lite as hl
        out = {}
        for mu in (0.0, 100.0):
            r = hl.run_experiment(
                hl.make_config("breast-cancer", "fedprox", epochs=2, fedprox_mu=mu),
                progress=False,
            )
            out[mu] = r["history"][-1]["train_loss"]
        print(json.dumps(out))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=installed, capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    losses = json.loads(done.stdout)
    # a strong proximal term keeps the weights near the start: the task's loss falls less
    assert sum(losses["100.0"]) > sum(losses["0.0"])


@pytest.mark.parametrize(
    "args, words",
    [
        (["--fedprox-mu", "-1"], "fedprox_mu must be a finite number >= 0; got -1"),
        (["--fedprox-mu", "nan"], "fedprox_mu must be a finite number >= 0"),
        (["--model", "small_digits"], None),  # not an option: argparse names it
        (["--clients", "40"], "breast-cancer: too few samples for 40 clients"),
    ],
)
def test_bad_settings_of_the_extension_get_one_line(installed, tmp_path, args, words):
    done = _cli(
        ["run", "--task", "breast-cancer", "--scheme", "fedprox", "--epochs", "1", "--quiet"]
        + args,
        installed,
        tmp_path,
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    if words is not None:
        assert words in done.stderr, done.stderr


def test_a_broken_extension_is_left_out_whole_with_a_warning(tmp_path):
    """One that registers a scheme and then fails: the scheme is gone, the rest runs."""
    (tmp_path / "broken_ext.py").write_text(
        textwrap.dedent(
            """
            import hcct_lite as hl
            from hcct_lite.schemes import GroupScheme

            class Half(GroupScheme):
                name = "half-registered"

                def groups(self, t, server):
                    return [list(server.active)]

            def register():
                hl.register_scheme(Half)
                raise RuntimeError("the extension's own bug")
            """
        )
    )
    info = tmp_path / "broken_ext-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-ext\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[hcct_lite.parts]\nbroken = broken_ext:register\n")
    code = "import hcct_lite.schemes.registry as r; print('half-registered' in r.scheme_names())"
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
    assert "the hcct-lite part 'broken' (broken_ext:register) failed to load" in done.stderr
    assert "the extension's own bug" in done.stderr


def test_a_script_without_a_main_guard_fails_at_once_under_workers(tmp_path):
    script = tmp_path / "grid.py"
    script.write_text(
        "import hcct_lite as hl\n"
        "hl.run_grid('rotated-digits', ['global'], [0, 1], 'out', workers=2, epochs=1,"
        " progress=False)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert 'needs its code under if __name__ == "__main__":' in done.stderr, done.stderr[-2000:]
