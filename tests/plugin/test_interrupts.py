"""Ctrl-C (SIGINT) at seeded moments ends a loader process promptly and cleanly (issue 15 defect 2,
issue 22): during iteration, during close(), and during interpreter exit while producers still run.

An abort (exit status -6, "terminate called ...", "FATAL: exception not rethrown") used to happen when
the interrupt cut short the exit hook's wait for the producers and the interpreter finalized with a
producer inside XLA or a codec. Each case runs a real child process (tests/plugin/helpers/interrupted.py).
"""

from __future__ import annotations

import pathlib
import random
import signal
import subprocess
import sys
import time

import pytest

HELPER = pathlib.Path(__file__).parent / "helpers" / "interrupted.py"
#: A hang guard, not a speed measure: the hangs seen before (30 s, or forever in issue 22's loop) exceed
#: it by far, while a loaded CI machine may stretch an exit (measured: < 1.3 s; docs/reliability.md).
END_WITHIN_S = 15.0
_MOMENTS = random.Random(15)
CASES = [(mode, round(_MOMENTS.uniform(0.0, window), 3))
         for mode, window in (("iterate", 1.0), ("exit", 0.3), ("shutdown", 1.0), ("spin", 0.5)) for _ in range(2)]


@pytest.mark.slow
@pytest.mark.parametrize("mode,delay", CASES)
def test_sigint_ends_the_process_promptly_without_abort(mode, delay, flowers_root, subprocess_env):
    child = subprocess.Popen([sys.executable, str(HELPER), mode, flowers_root], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=subprocess_env)
    try:
        line = child.stdout.readline()
        assert line.strip() == "ready", f"the child failed before the interrupt: {line}{child.stderr.read()}"
        time.sleep(delay)
        child.send_signal(signal.SIGINT)
        try:
            _, err = child.communicate(timeout=END_WITHIN_S)
        except subprocess.TimeoutExpired:
            child.kill()
            _, err = child.communicate()
            pytest.fail(f"{mode}: still running {END_WITHIN_S} s after SIGINT; stderr:\n{err[-3000:]}")
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    rc = child.returncode
    assert rc != -signal.SIGABRT and "terminate called" not in err and "FATAL" not in err, err[-3000:]
    if mode == "exit":
        # The interrupt may land after Python stopped handling it (then the default action ends the
        # process, -2) or after the last moment it matters (exit status 0).
        assert rc in (0, -signal.SIGINT, 130), err[-3000:]
    else:
        # Python turned the interrupt into a KeyboardInterrupt in the main thread: its traceback starts
        # stderr. Its last line is not asserted: once, on a loaded CI machine, the captured stderr ended
        # after the innermost frame while the exit status (-2) was right; 30 runs here never showed it.
        assert rc in (-signal.SIGINT, 130) and "Traceback (most recent call last)" in err, (rc, err[-3000:])


@pytest.mark.slow
def test_sigint_during_the_exit_wait_does_not_cut_it_short(flowers_root, subprocess_env, tmp_path):
    """The exit hook keeps waiting for a busy producer through a Ctrl-C: the producer's batch completes
    before the interpreter finalizes (when the wait was cut short, the interpreter finalized with the
    producer inside native code; here the producer would just vanish and never write its file)."""
    marker = tmp_path / "finished"
    child = subprocess.Popen([sys.executable, str(HELPER), "exit-busy", flowers_root, str(marker)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env)
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        time.sleep(0.5)  # the script has ended; the producer sleeps in its source for 1.5 s
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=END_WITHIN_S + 5)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode != -signal.SIGABRT, err
    assert marker.exists(), err[-3000:]
