"""The deployment guide's threat model claims only what the stored attack table shows."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCHEMES = {"Global": "global", "FedFA": "fedfa", "IFCA": "ifca", "HCCT": "hcct"}


def _table() -> dict:
    """(scheme, change in points) -> attacks, from benchmarks/attack-table.md."""
    out = {}
    text = (ROOT / "benchmarks" / "attack-table.md").read_text()
    for scheme, attack, change in re.findall(
        r"^\| (\w+) \| ([\w.+-]+) \| [\d.]+ \(([+-][\d.]+),", text, re.M
    ):
        out.setdefault((scheme, float(change)), []).append(attack)
    return out


def _threat_rows() -> list:
    text = (ROOT / "docs" / "deploy.md").read_text()
    section = text.split("### What the defaults hold")[1].split("\n\n`")[0]
    rows = [r for r in section.splitlines() if r.startswith("| ") and "---" not in r]
    return [[c.strip() for c in r.strip("|").split("|")] for r in rows[1:]]


def _claims(cell: str) -> list:
    """(scheme or None, value) for each signed number in a cell, its scheme named before it."""
    cell = cell.replace("−", "-")
    found = re.findall(
        r"(?:(Global|FedFA|IFCA|HCCT) )?([+-]\d+\.\d)(?: \((Global|FedFA|IFCA|HCCT)\))?", cell
    )
    return [(SCHEMES.get(before or after), float(v)) for before, v, after in found]


def test_every_number_of_the_threat_model_is_in_the_attack_table():
    table, rows = _table(), _threat_rows()
    assert len(rows) >= 10
    for row in rows:
        claims = _claims(row[3])
        assert claims, row
        for scheme, value in claims:
            hits = [k for k in table if k[1] == value and scheme in (None, k[0])]
            assert hits, (
                f"{row[0]} / {row[2]}: {scheme or 'some scheme'} {value:+.1f} is not in the table"
            )


def test_a_row_that_holds_has_no_change_over_two_points():
    for row in _threat_rows():
        worst = max(v for _, v in _claims(row[3]))
        assert (row[4] == "yes") == (worst <= 2.0), row
