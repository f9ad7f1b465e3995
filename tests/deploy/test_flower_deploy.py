"""A real deployment: SuperLink and SuperNodes as separate processes on 127.0.0.1 with TLS.

The test makes its own certificate authority, server certificate and SuperNode keys,
starts one `flower-superlink` with SuperNode authentication, registers one key per silo
(`flwr supernode register`), starts one `flower-supernode` per client (in the `hcct`
scenario a warm one: `--isolation process` beside `hcct-lite silo-exec`) and an intruder
whose key is not registered (it must be refused), submits a short job with `hcct-lite flower-run`
(HCCT, and IFCA, whose server probes every client with every cluster model) naming the
silos by their authenticated node ids, kills one SuperNode after the first epoch, checks
that the server carried on without it, and stops every process it started.
"""

import datetime
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("flwr")

import hcct_lite.deploy.flower  # noqa: E402
from hcct_lite.deploy.processes import die_with_parent  # noqa: E402
from hcct_lite.deploy.silo_exec import READY  # noqa: E402

BIN = Path(sys.executable).parent
APP = Path(hcct_lite.deploy.flower.__file__).parent / "app"
N_CLIENTS, EPOCHS, DEAD = 3, 3, 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_certificates(folder: Path) -> None:
    """A throwaway CA and a certificate for 127.0.0.1 signed by it."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hcct-test-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    (folder / "ca.crt").write_bytes(ca.public_bytes(pem))
    (folder / "server.pem").write_bytes(cert.public_bytes(pem))
    (folder / "server.key").write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


def make_node_keys(folder: Path, names) -> None:
    """An EC key pair per SuperNode, in the OpenSSH formats Flower reads (``name``, ``.pub``)."""
    from cryptography.hazmat.primitives import serialization as ser
    from cryptography.hazmat.primitives.asymmetric import ec

    for name in names:
        key = ec.generate_private_key(ec.SECP384R1())
        private = key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.OpenSSH, ser.NoEncryption())
        public = key.public_key().public_bytes(ser.Encoding.OpenSSH, ser.PublicFormat.OpenSSH)
        (folder / name).write_bytes(private)
        (folder / f"{name}.pub").write_bytes(public)


def register(key: Path, env: dict) -> int:
    """Register a SuperNode's public key with the SuperLink; returns its node id."""
    out = subprocess.run(
        [str(BIN / "flwr"), "supernode", "register", str(key), "hcct-tls"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    found = re.search(r"SuperNode (\d+) registered", out.stdout)
    assert out.returncode == 0 and found, out.stdout + out.stderr
    return int(found.group(1))


class Processes:
    """Processes started by the test, each in its own session, stopped by process id.

    Each dies with the test's process if that is killed (:func:`die_with_parent`): a CI
    timeout leaves no SuperLink, SuperNode or executor running.
    """

    def __init__(self, folder: Path, env: dict):
        self.folder, self.env, self.procs = folder, env, {}

    def start(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "w")  # noqa: SIM115 - closed by the OS
        p = subprocess.Popen(
            [str(BIN / args[0]), *args[1:]],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=self.folder,
            start_new_session=True,
            preexec_fn=die_with_parent(),  # a killed test run leaves no federation behind
        )
        self.procs[name] = p
        return p

    def kill(self, name: str) -> None:
        p = self.procs[name]
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)  # the process and the apps it spawned
        p.wait(timeout=10)

    def stop_all(self) -> None:
        for name in list(self.procs):
            self.kill(name)
        assert all(p.poll() is not None for p in self.procs.values())

    def log(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text(errors="replace")


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.5)


POISON_APP = Path(__file__).parent / "flower_poison_app"
# name -> (scheme, extra run config, app, node config of poisoned silos, seconds to wait
# for the result)
SCENARIOS = {
    "hcct": ("hcct", "", APP, {}, 900),
    "ifca": ("ifca", " cluster-models=2", APP, {}, 1200),  # the server probes 2 models
    # silo 1's ClientApp sends NaN weights after every training round
    "hcct-poisoned": ("hcct", "", POISON_APP, {1: ' poison="nan"'}, 900),
}
# scenarios whose silos run warm (--isolation process beside hcct-lite silo-exec)
WARM = {"hcct"}


def _environment(tmp_path: Path, link_port: int) -> dict:
    """Certificates, SuperNode keys and a Flower home naming the SuperLink, as env vars."""
    make_certificates(tmp_path)
    make_node_keys(tmp_path, [f"silo{i}" for i in range(N_CLIENTS)] + ["intruder"])
    home = tmp_path / "flwr-home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[superlink]\ndefault = "hcct-tls"\n\n[superlink.hcct-tls]\n'
        f'address = "127.0.0.1:{link_port}"\nroot-certificates = "{tmp_path / "ca.crt"}"\n'
    )
    return {
        **os.environ,
        "FLWR_HOME": str(home),
        "PYTHONUNBUFFERED": "1",
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def _start_federation(
    procs: Processes,
    tmp_path: Path,
    link_port: int,
    poisoned: dict,
    warm: bool,
    exec_args: dict | None = None,
) -> list:
    """SuperLink with SuperNode auth, the registered silos, and a refused intruder.

    ``warm``: each silo's SuperNode runs with ``--isolation process`` beside its own
    ``hcct-lite silo-exec`` (process group ``exec<i>``; its task records in
    ``tmp_path/state<i>``; ``exec_args[i]``: more of its options). Returns the silos' node
    ids, in client order.
    """
    procs.start(
        "superlink",
        "flower-superlink",
        "--ssl-ca-certfile",
        "ca.crt",
        "--ssl-certfile",
        "server.pem",
        "--ssl-keyfile",
        "server.key",
        "--port",
        str(link_port),
        "--disable-runtime-dependency-installation",
        "--enable-supernode-auth",
    )
    wait_for(lambda: "Uvicorn running on https" in procs.log("superlink"), 60, "the SuperLink")
    silos = [register(tmp_path / f"silo{i}.pub", procs.env) for i in range(N_CLIENTS)]
    # the intruder's key is not registered; it claims silo 1's partition id
    for i, name in [(i, f"silo{i}") for i in range(N_CLIENTS)] + [(1, "intruder")]:
        node_config = f"partition-id={i}" + (poisoned.get(i, "") if name != "intruder" else "")
        port, isolation = free_port(), ["--isolation", "process"] if warm else []
        procs.start(
            name,
            "flower-supernode",
            "--root-certificates",
            "ca.crt",
            "--superlink",
            f"127.0.0.1:{link_port}",
            "--port",
            str(port),
            "--node-config",
            node_config,
            "--auth-supernode-private-key",
            name,
            *isolation,
        )
        if warm and name != "intruder":
            procs.start(
                f"exec{i}",
                "hcct-lite",
                "silo-exec",
                "--runtime-api-address",
                f"127.0.0.1:{port}",
                "--insecure",
                "--state-dir",
                str(tmp_path / f"state{i}"),
                *(exec_args or {}).get(i, []),
            )
    for i in range(N_CLIENTS):
        wait_for(lambda i=i: "SuperNode ID" in procs.log(f"silo{i}"), 60, f"silo {i}")
        if warm:  # the warm silo says when its imports are done
            wait_for(lambda i=i: READY in procs.log(f"exec{i}"), 120, f"silo-exec {i}")
    # an unregistered key is refused: the SuperNode gives up, never gets an id
    wait_for(lambda: procs.procs["intruder"].poll() is not None, 60, "the intruder's exit")
    assert procs.procs["intruder"].returncode != 0
    assert "Failed to activate SuperNode" in procs.log("intruder")
    assert "SuperNode ID" not in procs.log("intruder")
    return silos


def _check(result: dict, scheme: str, silos: list, bad: set) -> None:
    """The run finished without the dead silo, and never used a poisoned silo's reply."""
    assert result["runtime"] == "flower" and len(result["history"]) == EPOCHS
    assert result["scheme"] == scheme and result["status"] == {"state": "complete"}
    assert result["domains"] == [f"node {n}" for n in silos]  # client i is silo i's key
    first, last = result["history"][0], result["history"][-1]
    assert first["missing"] == sorted(bad)
    assert all((e is None) == (i in bad) for i, e in enumerate(first["client_test_error"]))
    gone = sorted(bad | {DEAD})
    assert last["missing"] == gone and all(last["client_test_error"][i] is None for i in gone)
    healthy = sorted(set(range(N_CLIENTS)) - set(gone))
    assert sorted(i for g in last["groups"] for i in g) == healthy
    errors = [e for e in last["client_test_error"] if e is not None]
    assert result["final"]["mean"] == pytest.approx(sum(errors) / len(healthy))
    assert {r["client"] for r in result["rejected"]} == bad
    assert all("non-finite" in r["reason"] for r in result["rejected"])


def _submit(procs: Processes, app: Path, settings: str, out: Path, silos: list):
    """``hcct-lite flower-run`` (it waits for the run and returns its outcome), started."""
    config = (
        f'{settings} n-clients={N_CLIENTS} json-out="{out}" '
        f'silo-nodes="{" ".join(map(str, silos))}"'
    )
    return subprocess.Popen(
        [str(BIN / "hcct-lite"), "flower-run", str(app), "hcct-tls", "--run-config", config],
        env=procs.env,
        cwd=procs.folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=die_with_parent(),
    )


def _outcome(submit: subprocess.Popen, out: Path, patience: float) -> dict:
    """The result JSON, once written, and ``flower-run``'s word that the run completed."""
    wait_for(out.exists, patience, "the result JSON")
    result = json.loads(out.read_text())
    said = submit.communicate(timeout=120)[0]
    assert submit.returncode == 0 and "finished:completed" in said, said
    return result


def _stop(procs: Processes, submit) -> None:
    """Stop the submission (if it still waits) and every process of the federation."""
    if submit is not None and submit.poll() is None:
        submit.kill()
    procs.stop_all()


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_run_over_tls_survives_a_dead_client(tmp_path, scenario):
    scheme, extra, app, poisoned, patience = SCENARIOS[scenario]
    t0 = time.monotonic()
    link_port = free_port()
    procs = Processes(tmp_path, _environment(tmp_path, link_port))
    out, submit = tmp_path / "result.json", None
    try:
        silos = _start_federation(procs, tmp_path, link_port, poisoned, scenario in WARM)
        submit = _submit(
            procs, app, f'scheme="{scheme}" epochs={EPOCHS} round-timeout=60.0{extra}', out, silos
        )
        # kill a silo once epoch 0 is over: when epoch 1's training reaches it (killing it
        # right after its last reply of epoch 0 can lose that reply in the SuperLink)
        epoch1 = lambda: "ROUND epoch-1]" in procs.log(f"silo{DEAD}")  # noqa: E731
        wait_for(epoch1, 600, "epoch 1 to reach the silo")  # room for a loaded machine
        procs.kill(f"silo{DEAD}")
        if scenario in WARM:
            procs.kill(f"exec{DEAD}")
        result = _outcome(submit, out, patience)
    finally:
        _stop(procs, submit)
    _check(result, scheme, silos, set(poisoned))
    print(f"deployment test ({scenario}): {time.monotonic() - t0:.1f} s")
