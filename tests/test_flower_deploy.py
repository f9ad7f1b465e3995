"""A real deployment: SuperLink and SuperNodes as separate processes on 127.0.0.1 with TLS.

The test makes its own certificate authority and server certificate, starts one
`flower-superlink` and one `flower-supernode` per client, submits a short job with `flwr
run` (HCCT, and IFCA, whose server probes every client with every cluster model), kills one
SuperNode after the first epoch, checks that the server carried on without it, and stops
every process it started.
"""

import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("flwr")

import hcct_lite.flower  # noqa: E402

BIN = Path(sys.executable).parent
APP = Path(hcct_lite.flower.__file__).parent / "app"
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


class Processes:
    """Processes started by the test, each in its own session, stopped by process id."""

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


# scheme -> (extra run config, replies that make the first epoch per client, seconds to wait)
SCHEMES = {
    "hcct": ("", 3, 90),  # query, train, evaluate
    "ifca": (" cluster-models=2", 5, 240),  # query, two probes, train, evaluate
}


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_a_run_over_tls_survives_a_dead_client(tmp_path, scheme):
    extra, per_client, patience = SCHEMES[scheme]
    t0 = time.monotonic()
    make_certificates(tmp_path)
    home = tmp_path / "flwr-home"
    home.mkdir()
    link_port = free_port()
    (home / "config.toml").write_text(
        '[superlink]\ndefault = "hcct-tls"\n\n[superlink.hcct-tls]\n'
        f'address = "127.0.0.1:{link_port}"\nroot-certificates = "{tmp_path / "ca.crt"}"\n'
    )
    env = {
        **os.environ,
        "FLWR_HOME": str(home),
        "PYTHONUNBUFFERED": "1",
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    procs = Processes(tmp_path, env)
    out = tmp_path / "result.json"
    try:
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
        )
        wait_for(
            lambda: "Uvicorn running on https" in procs.log("superlink"), 60, "the SuperLink (TLS)"
        )
        for i in range(N_CLIENTS):
            procs.start(
                f"node{i}",
                "flower-supernode",
                "--root-certificates",
                "ca.crt",
                "--superlink",
                f"127.0.0.1:{link_port}",
                "--port",
                str(free_port()),
                "--node-config",
                f"partition-id={i}",
            )
        for i in range(N_CLIENTS):
            wait_for(lambda i=i: "SuperNode ID" in procs.log(f"node{i}"), 60, f"node {i}")
        config = (
            f'scheme="{scheme}" epochs={EPOCHS} n-clients={N_CLIENTS} round-timeout=15.0'
            f' json-out="{out}"{extra}'
        )
        run = subprocess.run(
            [str(BIN / "flwr"), "run", str(APP), "hcct-tls", "--run-config", config],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        replies = lambda: procs.log("superlink").count("Push replies from node_id")  # noqa: E731
        wait_for(lambda: replies() >= per_client * N_CLIENTS, 90, "the first epoch")
        procs.kill(f"node{DEAD}")
        wait_for(out.exists, patience, "the result JSON")
        result = json.loads(out.read_text())
    finally:
        procs.stop_all()
    assert result["runtime"] == "flower" and len(result["history"]) == EPOCHS
    assert result["scheme"] == scheme
    first, last = result["history"][0], result["history"][-1]
    assert first["missing"] == [] and all(e is not None for e in first["client_test_error"])
    assert last["missing"] == [DEAD] and last["client_test_error"][DEAD] is None
    assert all(DEAD not in g for g in last["groups"])
    assert sorted(i for g in last["groups"] for i in g) == [0, 1]
    assert result["final"]["mean"] == pytest.approx(
        sum(e for e in last["client_test_error"] if e is not None) / 2
    )
    print(f"deployment test ({scheme}): {time.monotonic() - t0:.1f} s")
