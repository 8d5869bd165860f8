"""Tests never write the learner's own progress file: tests/conftest.py points $MINIVLLM_PROGRESS at a temporary
one before any lab module runs, so a live quiz clicked by a test (or a kernel a test starts) records there."""

from pathlib import Path

from minivllm_labs.progress_file import progress_path


def test_the_progress_file_is_a_temporary_one():
    p = progress_path().resolve()
    assert not p.is_relative_to((Path.home() / ".minivllm").resolve()), p
