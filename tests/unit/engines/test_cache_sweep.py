"""rattler's extraction temp folders are swept from the package cache, and nothing else is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from envkit.engines.cache_sweep import leftover_temps, sweep_rattler_temps

STEM = "python-3.11.7-0_envkit_standin"


def layout(pkgs: Path) -> dict[str, Path]:
    pkgs.mkdir(parents=True)
    (pkgs / ".cache.lock").write_text("")
    (pkgs / f"{STEM}.lock").write_text("")
    (pkgs / STEM / "info").mkdir(parents=True)  # the finished entry
    paths = {name: pkgs / name for name in (f".{STEM}vJ9dEz",  # rattler's leftover: swept
                                            f".{STEM}Ab3",  # too short for rattler's suffix
                                            ".other-1.0-0Qw3rTy",  # no other-1.0-0.lock beside it
                                            ".git", ".envkit-notes")}
    for path in paths.values():
        path.mkdir()
        (path / "file.txt").write_text("keep?")
    (pkgs / f".{STEM}File12").write_text("a file, not a folder")
    outside = pkgs.parent / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("never follow links")
    (pkgs / f".{STEM}Link99").symlink_to(outside)
    return paths


def test_only_rattlers_unlocked_temp_folders_go(tmp_path: Path) -> None:
    pkgs = tmp_path / "pkgs"
    paths = layout(pkgs)
    assert leftover_temps(pkgs) == [paths[f".{STEM}vJ9dEz"]]
    notes = sweep_rattler_temps(pkgs)
    assert len(notes) == 1 and "removed 1 unfinished package extraction" in notes[0]
    assert not paths[f".{STEM}vJ9dEz"].exists()
    for name, path in paths.items():
        if name != f".{STEM}vJ9dEz":
            assert (path / "file.txt").is_file(), name
    assert (pkgs / STEM / "info").is_dir() and (pkgs / f".{STEM}File12").is_file()
    assert (pkgs / f".{STEM}Link99").is_symlink() and (tmp_path / "outside" / "precious.txt").is_file()
    assert (pkgs / ".cache.lock").is_file() and (pkgs / f"{STEM}.lock").is_file()
    assert sweep_rattler_temps(pkgs) == []  # nothing left to do


def test_nothing_is_swept_while_an_install_holds_the_cache(tmp_path: Path) -> None:
    pkgs = tmp_path / "pkgs"
    temp = layout(pkgs)[f".{STEM}vJ9dEz"]
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys\n"
                               f"fd = os.open({str(pkgs / '.cache.lock')!r}, os.O_RDWR)\n"
                               "fcntl.flock(fd, fcntl.LOCK_SH)\nprint('held', flush=True)\nsys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert sweep_rattler_temps(pkgs) == [] and (temp / "file.txt").is_file()  # rattler is running
    finally:
        holder.communicate("")
    assert sweep_rattler_temps(pkgs) and not temp.exists()  # its owner is gone: now it goes


def test_no_cache_lock_means_no_sweep(tmp_path: Path) -> None:
    pkgs = tmp_path / "pkgs"
    temp = layout(pkgs)[f".{STEM}vJ9dEz"]
    (pkgs / ".cache.lock").unlink()
    assert sweep_rattler_temps(pkgs) == [] and temp.is_dir()
