"""A grid's runs as Ray tasks: on this machine, or on a cluster of many.

Each run is one Ray task of one CPU (and a share of a GPU for a CUDA grid). The driver
writes each result through the same store and reuse rules as the process pool, so a grid
resumes after a killed driver. Nodes need only the package and the data (``HCCT_DATA_DIR``);
Ray reruns the runs of a node that dies (:attr:`RayOptions.retries`).
"""

from __future__ import annotations

import importlib.util
import logging
import math
import os
import re
import socket
from dataclasses import dataclass

from ..runs.jobs import Job, Outcome, compute_job, one_torch_thread, store_job
from ..training.provenance import CPU_KERNELS

__all__ = [
    "RayOptions",
    "ray_runs",
    "connect",
    "check_reachable",
    "ray_environment",
    "RAY_STARTUP_WAIT",
    "plain_ray_logs",
    "where",
]

# Seconds Ray waits for a node to start (Ray's own default is short on a loaded machine);
# HCCT_RAY_STARTUP_WAIT overrides it.
RAY_STARTUP_WAIT = 60.0


@dataclass(frozen=True)
class RayOptions:
    """Where and how a grid runs on Ray.

    Parameters
    ----------
    address : str or None
        None starts a Ray cluster on this machine for the grid (and stops it after);
        ``"auto"`` joins the cluster already running here (``ray start --head``);
        ``"host:port"`` joins that cluster's head.
    gpus_per_run : float or None
        A CUDA run's share of one GPU (0 < share <= 1); None: the share its expected
        memory fills of :data:`~hcct_lite.gpu.queue.CARD_GB`
        (:func:`~hcct_lite.gpu.queue.gpu_share`, the memory model the single-machine queue
        admits runs by). Ray's shares only schedule: they do not limit a run's memory. CPU
        runs ask for no GPU.
    startup_wait : float or None
        Seconds Ray waits for a node to start; None: ``HCCT_RAY_STARTUP_WAIT`` or
        :data:`RAY_STARTUP_WAIT`.
    retries : int
        How many times Ray reruns a run whose node or worker died; a run that still fails
        is listed, with why, when the grid ends.
    """

    address: str | None = None
    gpus_per_run: float | None = None
    startup_wait: float | None = None
    retries: int = 3

    def __post_init__(self):
        if importlib.util.find_spec("ray") is None:  # said before a grid is planned
            raise ValueError("--ray needs Ray: pip install 'hcct-lite[ray]'")
        if self.gpus_per_run is not None and not 0 < self.gpus_per_run <= 1:
            raise ValueError(f"--gpus-per-run must be in (0, 1]; got {self.gpus_per_run}")
        if self.startup_wait is not None:
            _check_wait(self.startup_wait, "--ray-startup-wait")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0; got {self.retries}")

    def run(self, jobs, out_dir: str, device, cpu_capability=None):
        """:func:`ray_runs` with these options (how the grid runner calls the part)."""
        return ray_runs(jobs, out_dir, device, self, cpu_capability)

    def gpus(self, job: Job, device) -> float:
        """The GPU share ``job`` asks for: none unless it runs on CUDA."""
        if not str(device or job.overrides.get("device", "cpu")).startswith("cuda"):
            return 0.0
        if self.gpus_per_run is not None:
            return self.gpus_per_run
        from ..gpu.queue import gpu_share

        return gpu_share(job)


MAX_STARTUP_WAIT = 86_400  # a day: past it a typo, not a slow machine


def _check_wait(value, name: str) -> int:
    """``value`` as whole seconds (rounded up) if it is a number in (0, a day], else raise."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if not 0 < seconds <= MAX_STARTUP_WAIT:  # NaN and inf fail too
        raise ValueError(
            f"{name} must be a number of seconds in (0, {MAX_STARTUP_WAIT}]; got {value!r}"
        )
    return math.ceil(seconds)


def ray_environment(startup_wait=None) -> None:
    """Set the variables Ray reads when it starts a node, before it starts one.

    ``startup_wait`` (seconds) wins over any earlier setting; without it a value the
    environment already gives Ray is kept, else ``HCCT_RAY_STARTUP_WAIT`` or
    :data:`RAY_STARTUP_WAIT`.
    """
    if startup_wait:
        os.environ["RAY_raylet_start_wait_time_s"] = str(
            _check_wait(startup_wait, "--ray-startup-wait")
        )
    else:
        wait = os.environ.get("HCCT_RAY_STARTUP_WAIT", RAY_STARTUP_WAIT)
        wait = _check_wait(wait, "HCCT_RAY_STARTUP_WAIT")
        os.environ.setdefault("RAY_raylet_start_wait_time_s", str(wait))
    # Ray runs its workers at nice 15: beside any other busy process they then starve.
    os.environ.setdefault("RAY_worker_niceness", "0")
    # CPU-only tasks keep the GPUs visible as they are (Ray's coming default; silences a warning)
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    # workers' lines forwarded to the driver without colour codes: logs are read as text
    os.environ.setdefault("RAY_COLOR_PREFIX", "0")


# a terminal's colour and style codes (ESC [ ... m), which Ray writes into its log lines
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class PlainText(logging.Filter):
    """Strip terminal colour codes from a log record (Ray colours the dashboard's address)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep the record, its message as plain text."""
        record.msg = ANSI.sub("", record.getMessage())
        record.args = None
        return True


def plain_ray_logs() -> None:
    """Make Ray's own log lines (its ``ray`` logger's handlers) plain text, once."""
    for handler in logging.getLogger("ray").handlers:
        if not any(isinstance(f, PlainText) for f in handler.filters):
            handler.addFilter(PlainText())


def connect(options: RayOptions):
    """Start or join the Ray cluster ``options`` names; return the ``ray`` module.

    Raises ``ValueError`` (one sentence naming the address) when no cluster answers there;
    :class:`RayOptions` has refused already where Ray is not installed.
    """
    import ray

    ray_environment(options.startup_wait)
    plain_ray_logs()
    if options.address not in (None, "auto"):
        check_reachable(options.address)
    where = "a new local cluster" if options.address is None else repr(options.address)
    # "local": a new Ray of this machine even where one already runs (ray.init() would join it)
    kw = dict(
        address=options.address or "local",
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    try:
        ray.init(**kw)
    except Exception as err:  # noqa: BLE001 - Ray fails to connect in many ways
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"--ray: cannot start or reach {where} ({first})") from None
    return ray


def check_reachable(address: str, timeout: float = 10.0) -> None:
    """Raise ``ValueError`` unless something answers at ``address`` (``host:port``).

    Ray itself retries an address that does not answer for minutes; this says so at once.
    """
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--ray: an address is host:port or auto; got {address!r}")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as err:
        raise ValueError(
            f"--ray {address}: nothing answers there ({err.strerror or err}); start the head "
            "with `ray start --head` and give the address it prints"
        ) from None


def where(node: dict) -> str:
    """``"node HOST (IP, Ray node ID)"``: a run's node as a failure line names it."""
    return f"node {node['host']} ({node['ip']}, Ray node {node['ray_node_id']})"


def _node() -> dict:
    """Where this task runs: host name, IP address and Ray node id."""
    import ray

    return {
        "host": socket.gethostname(),
        "ip": ray.util.get_node_ip_address(),
        "ray_node_id": ray.get_runtime_context().get_node_id(),
    }


def _remote_run(job: Job, device) -> tuple:
    """One run inside a Ray worker: ``(result or None, reason or None, node)``."""
    from ..gpu.queue import release_gpu_cache

    one_torch_thread()
    node = _node()
    try:
        result, why = compute_job(job, device)
    finally:  # Ray reuses its workers: what the allocator kept would be counted twice
        release_gpu_cache(device or job.overrides.get("device", "cpu"))
    if result is not None:
        result["provenance"]["node"] = node
    return result, why, node


def ray_runs(jobs, out_dir: str, device, options: RayOptions, cpu_capability=None):
    """Run ``jobs`` as Ray tasks; yield each one's :class:`~hcct_lite.runs.jobs.Outcome`.

    The cluster is started or joined here, before the first job (so a bad address is an
    error at once). As each run finishes, in the order they finish, its file is written
    here (the driver), so what a killed driver loses is only the runs in flight.
    ``cpu_capability`` pins the workers' CPU kernels
    (:data:`~hcct_lite.training.provenance.CPU_KERNELS`). The cluster is left (and a local
    one stopped) when the iterator ends or is closed. A run that cannot find its data names
    the node it ran on.
    """
    ray = connect(options)
    try:
        _check_resources(ray, jobs, device, options)
    except ValueError:
        ray.shutdown()
        raise
    return _results(ray, jobs, out_dir, device, options, cpu_capability)


def _check_resources(ray, jobs, device, options) -> None:
    """Raise ``ValueError`` when no node could ever run a job (Ray would wait forever)."""
    have = ray.cluster_resources()
    share = max((options.gpus(j, device) for j in jobs), default=0.0)
    if have.get("CPU", 0) < 1:
        raise ValueError("--ray: the cluster has no CPU to run on")
    if share > 0 and have.get("GPU", 0) <= 0:
        raise ValueError(
            "--ray: the runs ask for a GPU (--device cuda) but the cluster has none "
            "(start its nodes with `ray start --num-gpus N`)"
        )


def _results(ray, jobs, out_dir, device, options, cpu_capability):
    try:
        remote = ray.remote(_remote_run)
        env = {"OMP_NUM_THREADS": "1"}
        if cpu_capability is not None:
            env.update(CPU_KERNELS[cpu_capability])
        refs = {}
        for job in jobs:
            task = remote.options(
                num_cpus=1,
                num_gpus=options.gpus(job, device),
                max_retries=options.retries,
                retry_exceptions=False,
                runtime_env={"env_vars": env},
            )
            refs[task.remote(job, device)] = job
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield _collect(ray, refs[done[0]], done[0], out_dir)
    finally:
        ray.shutdown()


def _collect(ray, job: Job, ref, out_dir: str) -> Outcome:
    """A finished task's :class:`~hcct_lite.runs.jobs.Outcome`; its result written if any."""
    try:
        result, why, node = ray.get(ref)
    except ray.exceptions.RayError as err:  # its node died more often than Ray may retry
        return Outcome(job, reason=f"{type(err).__name__}: {str(err).strip().splitlines()[0]}")
    if result is None:
        return Outcome(job, reason=f"on {where(node)}: {why}")
    return store_job(job, out_dir, result)
