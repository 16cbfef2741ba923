"""``python -m neuroncompat`` reaches the processes a script spawns (``neuroncompat/child_processes.py``).

A ``spawn`` child is a fresh interpreter that imports the script as ``__mp_main__``; without this
it would run without the shim (and without ``NEURONCOMPAT_CUDA=redirect``): the pytorch/examples
DDP tutorial's ``mp.spawn`` workers failed at ``torch.cuda.set_device``. The end-to-end run with
DDP is ``test_mp_spawn_workers_are_redirected_and_ddp_moves_cpu_batches``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import multiprocessing as mp
import sys


def child(queue):
    queue.put("neuroncompat" in sys.modules)


if __name__ == "__main__":
    context = mp.get_context("spawn")
    queue = context.Queue()
    worker = context.Process(target=child, args=(queue,))
    worker.start()
    print("child has neuroncompat:", queue.get(timeout=120))
    worker.join()
"""


def _run(*args: str, cwd: Path) -> str:
    result = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300, cwd=cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_spawned_child_of_a_script_run_through_neuroncompat_imports_the_shim(tmp_path: Path) -> None:
    script = tmp_path / "spawner.py"
    script.write_text(SCRIPT)
    assert "child has neuroncompat: True" in _run("-m", "neuroncompat", str(script), cwd=tmp_path)
    assert "child has neuroncompat: False" in _run(str(script), cwd=tmp_path)
