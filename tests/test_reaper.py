"""The reaper (frd/reaper.py): once the frd process it guards is killed with ``kill -9``, a child
that frd started with a death signal gets that one SIGTERM only (a second one cut a SuperNode's
graceful exit short: it never left its SuperLink), what runs below that child is ended, and the
folders the reaper was given are removed."""
import subprocess
import sys
import time

import pytest

from frd.reaper import POLL_S, descendants
from tests.processes import command_line, kill_9, left_after, running, wait_for

pytestmark = pytest.mark.processes  # every test here starts processes (pytest -m 'not processes' skips them)

GUARDED = '''
import subprocess, sys, time
from frd import reaper
from frd.flower.launch import end_with_parent
log, folder = sys.argv[1], sys.argv[2]
subprocess.Popen([sys.executable, "-c", CHILD, log], preexec_fn=end_with_parent(), start_new_session=True)
reaper.start(remove=(folder,))
time.sleep(120)
'''
CHILD = '''
import signal, subprocess, sys, time
log = open(sys.argv[1], "a")
terms = []
def on_term(signum, frame):
    terms.append(time.monotonic())
    log.write("TERM\\n")
    log.flush()
signal.signal(signal.SIGTERM, on_term)
subprocess.Popen(["sleep", "120"])  # below the child, with no death signal: the reaper's to end
log.write("up\\n")
log.flush()
while not terms or time.monotonic() < terms[0] + 1.5:  # a graceful exit that takes its time
    time.sleep(0.05)
'''


def test_a_child_with_a_death_signal_gets_one_sigterm_and_what_runs_below_it_is_ended(tmp_path):
    log, folder = tmp_path / "child.log", tmp_path / "home"
    folder.mkdir()
    guarded = subprocess.Popen([sys.executable, "-c", GUARDED.replace("CHILD", repr(CHILD)), str(log), str(folder)],
                               stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: log.exists() and "up" in log.read_text(), guarded, log, "the child up")
        wait_for(lambda: running(guarded.pid, "sleep") and reaper_of(guarded.pid), guarded, log, "the sleep, the reaper")
        time.sleep(5 * POLL_S)  # the reaper, started in 0.06 s, has noted what runs below
        below = kill_9(guarded)
        assert not left_after(below)
        assert log.read_text() == "up\nTERM\n"
        assert not folder.exists()
    finally:
        if guarded.poll() is None:
            guarded.kill()



def reaper_of(root: int) -> bool:
    """Whether ``root``'s reaper runs (its command line names ``frd.reaper``)."""
    return any("frd.reaper" in command_line(pid) for pid, _ in descendants(root))
