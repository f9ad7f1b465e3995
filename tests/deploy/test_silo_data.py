"""A rehearsal silo builds the federation once, keeps its own share, and loads only that."""

import pytest
import torch

pytest.importorskip("flwr")

from hcct_lite.deploy.flower import silo_data as sd  # noqa: E402
from hcct_lite.training.config import make_config  # noqa: E402

CFG = make_config("rotated-digits", "hcct", 0)


def _fresh_process(monkeypatch):
    monkeypatch.setattr(sd, "_MEMORY", {})  # a new ClientApp process remembers nothing


def test_the_first_message_builds_and_keeps_the_share_later_ones_load_it_alone(
    tmp_path, monkeypatch
):
    node = {"partition-id": 3, "cache-dir": str(tmp_path)}
    _fresh_process(monkeypatch)
    i, built = sd.silo_data(CFG, node)
    assert i == 3 and len(list(tmp_path.glob("*.pt"))) == 1
    _fresh_process(monkeypatch)
    monkeypatch.setattr(sd, "build_clients", lambda cfg: pytest.fail("rebuilt the federation"))
    _, loaded = sd.silo_data(CFG, node)
    assert torch.equal(loaded.x_train, built.x_train) and torch.equal(loaded.y_test, built.y_test)
    assert loaded.domain == built.domain and loaded.size == built.size


def test_a_damaged_share_is_rebuilt_and_a_new_setting_gets_its_own(tmp_path, monkeypatch, caplog):
    node = {"partition-id": 1, "cache-dir": str(tmp_path)}
    path = sd.share_path(CFG, 1, str(tmp_path))
    tmp_path.joinpath(path.rsplit("/", 1)[1]).write_bytes(b"not a share")
    _fresh_process(monkeypatch)
    _, data = sd.silo_data(CFG, node)
    assert "cannot be read" in caplog.text and data.size > 0
    assert torch.load(path, weights_only=True)["y_train"].shape[0] == data.size
    other = make_config("rotated-digits", "hcct", 1)
    assert sd.share_path(other, 1, str(tmp_path)) != path
    assert sd.share_path(CFG, 2, str(tmp_path)) != path


def test_a_node_without_partition_id_or_data_path_is_told_what_it_needs():
    with pytest.raises(ValueError, match="node config needs partition-id"):
        sd.silo_data(CFG, {})


def test_one_process_hosting_many_silos_builds_the_federation_once(tmp_path, monkeypatch):
    _fresh_process(monkeypatch)
    calls, build = [], sd.build_clients
    monkeypatch.setattr(sd, "build_clients", lambda cfg: calls.append(1) or build(cfg))
    for i in range(CFG.n_clients):
        assert sd.silo_data(CFG, {"partition-id": i, "cache-dir": str(tmp_path)})[0] == i
    assert len(calls) == 1 and len(list(tmp_path.glob("*.pt"))) == CFG.n_clients
