"""Shared fixtures of the integration tests: the examples on sys.path, laptime reset around each
test and the NVTX injection recorder, both reused from python/tests/conftest.py (helpers in
integ_helpers.py)."""

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent
REPO = EXAMPLES.parents[1]
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

# python/tests/conftest.py, loaded under another name: its fixtures (fresh_laptime is autouse)
# become this folder's by being imported here.
_spec = importlib.util.spec_from_file_location("laptime_python_conftest",
                                               REPO / "python" / "tests" / "conftest.py")
_python_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_python_conftest)
fresh_laptime = _python_conftest.fresh_laptime
nvtx_recorder = _python_conftest.nvtx_recorder

