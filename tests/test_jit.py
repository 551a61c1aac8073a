"""frd's JIT module: a cached function is stamped with every source it reaches, found from the code."""
import subprocess
import sys
import textwrap

import pytest

from frd.jit import reached_sources

CALLEE = """
from frd.jit import compiled


@compiled()
def value():
    return {value}
"""
CALLER = """
import numba

import pytest

from frd.jit import compiled
from stamped.callee import value


@compiled()
def total():
    return value() + 100


@numba.njit(cache=True)
def total_by_numba():  # numba's own stamp: its file alone
    return value() + 100
"""
SHOW = "from stamped.caller import total, total_by_numba; print(total(), total_by_numba(), sum(total.stats.cache_hits.values()))"


def test_the_fused_period_and_the_first_block_are_stamped_with_what_they_call():
    import frd.classification.distillation.first_block
    import frd.rl.fused

    assert {"kernel.py", "lanes.py", "acrobot.py", "episode_end.py", "fused.py", "jit.py"} <= {
        path.name for path in reached_sources(frd.rl.fused)}
    assert {"first_block.py", "norm_block.py", "jit.py"} <= {
        path.name for path in reached_sources(frd.classification.distillation.first_block)}


@pytest.mark.processes
def test_an_edit_of_a_called_module_reaches_its_cached_callers_in_a_fresh_process(tmp_path):
    package = tmp_path / "stamped"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "caller.py").write_text(textwrap.dedent(CALLER))
    callee = package / "callee.py"

    def fresh_process() -> list[int]:
        # -B: Python's own bytecode cache would hide an edit of the same size within the same second
        out = subprocess.run([sys.executable, "-B", "-c", SHOW], cwd=tmp_path, capture_output=True, text=True, check=True)
        return [int(word) for word in out.stdout.split()]

    callee.write_text(CALLEE.format(value=1))
    assert fresh_process() == [101, 101, 0]     # compiled and cached
    assert fresh_process() == [101, 101, 1]     # loaded from the cache
    callee.write_text(CALLEE.format(value=2))   # the caller's file is untouched
    total, by_numba, hits = fresh_process()
    assert (total, hits) == (102, 0)            # compiled again, with the edit
    assert by_numba == 101                      # numba's stamp alone kept the old code
