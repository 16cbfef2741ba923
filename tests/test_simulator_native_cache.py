"""The cached native library: keyed on every file of ``native/``, and checked against the size and SHA-256 its
build wrote before it is loaded.

A truncated library used to crash every entry point with SIGBUS and no message, and was never rebuilt. The C++
is one file per capability: editing any of them (or a header they share) must rebuild, and each must ship.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import pytest
import tomllib

from neuroncompat.simulator import native_device


def _cached_copy(cache: Path) -> Path:
    """This torch build's library, with its digest and its kept objects, copied into ``cache`` (as
    NEURONCOMPAT_CACHE_DIR)."""
    native_device.load()  # built (and its digest written) in the default cache, or already there
    built = native_device._library_path()
    target = cache / "native" / built.name
    target.parent.mkdir(parents=True)
    shutil.copyfile(built, target)
    shutil.copyfile(native_device._digest_path(built), native_device._digest_path(target))
    objects = target.parent / "objects"
    objects.mkdir()
    for kept in native_device._object_paths().values():
        if kept.exists():  # a library built before objects were kept has none: the rebuild compiles them
            shutil.copyfile(kept, objects / kept.name)
    return target


def _truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(size)


def test_a_truncated_or_undigested_library_is_found_damaged(tmp_path: Path) -> None:
    library = _cached_copy(tmp_path)
    size = library.stat().st_size
    assert native_device.damage(library) is None
    _truncate(library, 300_000)
    assert native_device.damage(library) == f"it is 300000 bytes, the build wrote {size}"
    _truncate(library, 0)
    assert native_device.damage(library) == f"it is 0 bytes, the build wrote {size}"
    native_device._digest_path(library).unlink()
    assert native_device.damage(library) == "it has no digest file"
    library.unlink()
    assert native_device.damage(library) == "not built yet"


def test_a_library_changed_in_place_is_found_damaged(tmp_path: Path) -> None:
    library = _cached_copy(tmp_path)
    with open(library, "r+b") as handle:
        handle.seek(1000)
        byte = handle.read(1)
        handle.seek(1000)
        handle.write(bytes([byte[0] ^ 0xFF]))
    assert native_device.damage(library) == "its SHA-256 differs from the build's"


@pytest.mark.slow  # a fresh process on the simulated device; relinks the kept objects (compiles them if none)
@pytest.mark.parametrize("size", [300_000, 0])
def test_a_fresh_process_rebuilds_a_truncated_library_and_says_so(tmp_path: Path, size: int) -> None:
    library = _cached_copy(tmp_path)
    built = library.stat().st_size
    _truncate(library, size)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURONCOMPAT_")}
    env.update(NEURONCOMPAT_CACHE_DIR=str(tmp_path), NEURONCOMPAT_SIMULATE="1")
    done = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.ones(3, device='neuron').sum().item())"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "3.0"
    assert (
        f"neuroncompat: the cached simulator library {library} is damaged "
        f"(it is {size} bytes, the build wrote {built}); rebuilding it"
    ) in done.stderr
    assert native_device.damage(library) is None
    assert sorted(path.name for path in (tmp_path / "native" / "objects").iterdir()) == sorted(
        kept.name for kept in native_device._object_paths().values()
    ), "one kept object per source file"


def _native_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of ``native/`` that the build reads instead (so a test can edit it)."""
    native = tmp_path / "native"
    shutil.copytree(native_device.NATIVE, native)
    monkeypatch.setattr(native_device, "NATIVE", native)
    return native


def test_an_edit_to_any_source_or_header_rebuilds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    native = _native_copy(tmp_path, monkeypatch)
    built = native_device._library_path()
    files = sorted(native.iterdir())
    assert {".cpp", ".h"} <= {path.suffix for path in files}
    for path in files:
        text = path.read_bytes()
        path.write_bytes(text + b"\n// edited\n")
        assert native_device._library_path() != built, f"editing {path.name} would load the stale library"
        path.write_bytes(text)
    assert native_device._library_path() == built
    (native / "new_capability.cpp").write_text("// a file added by a split\n")
    assert native_device._library_path() != built
    assert native / "new_capability.cpp" in native_device._units()


def test_every_file_the_build_reads_ships_in_the_package() -> None:
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["neuroncompat.simulator"]
    for path in native_device._sources():
        assert any(fnmatch(f"native/{path.name}", pattern) for pattern in patterns), f"{path.name} is not packaged"


def test_a_file_that_does_not_compile_is_named_with_the_compiler_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    native = tmp_path / "native"
    native.mkdir()
    (native / "fine.cpp").write_text("int fine() { return 1; }\n")
    (native / "broken.cpp").write_text("int broken() { return undeclared_name; }\n")
    monkeypatch.setattr(native_device, "NATIVE", native)
    monkeypatch.setenv("NEURONCOMPAT_CACHE_DIR", str(tmp_path / "cache"))  # the objects it keeps go there
    build = tmp_path / "build"
    build.mkdir()
    with pytest.raises(native_device.NativeDeviceUnavailable) as raised:
        native_device._compile(build, build / "out.so")
    message = str(raised.value)
    assert "compiling broken.cpp" in message and "undeclared_name" in message
    assert "fine.cpp" not in message
