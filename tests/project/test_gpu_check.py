"""The GPU tooling, run on a CPU: ``./dev gpu-check`` refuses a machine without CUDA at once,
and the device paths of the benchmarks run end to end at toy sizes (``--device cpu --tiny``),
so the script the GPU run depends on is not untested code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(REPO / "src")}
    env.pop("OUT", None)
    return subprocess.run(list(args), capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=timeout, check=False)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without CUDA")
def test_gpu_check_stops_at_once_without_cuda():
    done = _run("./dev", "gpu-check", timeout=120)
    assert done.returncode == 2
    assert "torch sees no CUDA device" in done.stdout + done.stderr
    assert "CUDA tests" not in done.stdout  # no step ran


def test_gpu_check_refuses_unknown_arguments():
    done = _run("./dev", "gpu-check", "--fast", timeout=60)
    assert done.returncode == 2
    assert "usage: ./dev gpu-check [--cpu-smoke]" in done.stderr


@pytest.mark.slow
def test_bench_prune_device_path_runs_on_cpu():
    done = _run(sys.executable, "benchmarks/bench_prune.py", "--device", "cpu", "--tiny",
                "--shapes", "4096x4096", "--methods", "l1_unstructured", "custom_from_mask",
                "--dtypes", "float32", "--repeats", "2", "--warmup", "0")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| l1_unstructured")
            or line.startswith("| custom_from_mask")]
    assert len(rows) == 2
    assert all(row.rstrip(" |").endswith("identical") for row in rows), rows


@pytest.mark.slow
def test_bench_large_device_path_runs_on_cpu():
    done = _run(sys.executable, "benchmarks/bench_large.py", "--device", "cpu", "--blocks", "1",
                "--tiny", "--torch-blocks", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| apply_global (amount 0.5, after its preview) |" in done.stdout
    assert "first block: 395,264 pruned of 790,528" in done.stdout
    assert "(ESTIMATE, not run)" in done.stdout


@pytest.mark.slow
def test_bench_launches_counts_every_case_on_cpu():
    done = _run(sys.executable, "benchmarks/bench_launches.py", "--tiny", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line.split("|")[1:-1] for line in done.stdout.splitlines()
            if line.startswith("| `")]
    assert len(rows) == 5 + 5 + 2  # every method twice, the two global cases once
    for case, _, theirs, ours, ratio in rows:
        torch_kernels = int(theirs.split("/")[0])
        ours_kernels, ours_syncs, _ = (int(x) for x in ours.split("/"))
        assert ours_syncs == 0, case
        assert float(ratio) == pytest.approx(ours_kernels / torch_kernels, abs=0.01)
        if "global" not in case:  # one call per tensor: never more launches than torch
            assert ours_kernels <= torch_kernels, (case, ours, theirs)
