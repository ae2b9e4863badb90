"""Shared test setup: offline, deterministic, small."""

import os
from pathlib import Path

# Nothing may reach the Hub from a test.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_DISABLED", "true")
# Training takes as many CPU threads as the machine has idle cores (hf_ctx.tools.cpu_threads), and a thread count
# changes float sums: tests that compare two runs need the same count in both, so the suite fixes it
# (test_cpu_threads.py tests the choice itself).
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

# The shared data sit beside the repository on development machines and in CI.
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def shared_data():
    """Path to ../shared/data; skips the test when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not found at {SHARED_DATA}")
    return SHARED_DATA


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device; this machine has none")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


class HostSyncCounter(TorchDispatchMode):
    """Counts the operations that make the host wait for the device: reading a value (`.item()`, `bool()`,
    `.tolist()`) and indexing with a boolean mask (its result's size depends on the values). On CPU nothing
    waits, but the same code on CUDA would wait there."""

    def __init__(self):
        super().__init__()
        self.syncs = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default or func in (
            torch.ops.aten.nonzero.default,
            torch.ops.aten.masked_select.default,
        ):
            self.syncs.append(str(func))
        elif func is torch.ops.aten.index.Tensor and any(i is not None and i.dtype == torch.bool for i in args[1]):
            self.syncs.append("boolean indexing")
        return func(*args, **(kwargs or {}))


@pytest.fixture
def count_host_syncs(monkeypatch):
    """`with count_host_syncs() as counter: ...`, then `len(counter.syncs)`: the host syncs the block did."""
    tolist = torch.Tensor.tolist

    def counting_tolist(tensor):
        for mode in active:
            mode.syncs.append("tolist")
        return tolist(tensor)

    active = []
    monkeypatch.setattr(torch.Tensor, "tolist", counting_tolist)

    class Counting(HostSyncCounter):
        def __enter__(self):
            active.append(self)
            return super().__enter__()

        def __exit__(self, *exc):
            active.remove(self)
            return super().__exit__(*exc)

    return Counting


@pytest.fixture(scope="module")
def hub_server():
    """A Hub on 127.0.0.1 over HTTP (`hub_server.HubServer`), one per test module."""
    from hub_server import HubServer

    with HubServer() as server:
        yield server


@pytest.fixture
def hub(hub_server, monkeypatch, tmp_path):
    """The Hub, empty, with this process's client (and the processes a test starts) online and pointed at it."""
    from hub_server import point_client_at

    hub_server.reset()
    point_client_at(monkeypatch, hub_server, tmp_path / "hf_home")
    yield hub_server
    assert hub_server.unknown == [], "the client called routes hub_server does not serve"
