"""The integrations import their framework lazily and name the pip extra when it is missing."""

import subprocess
import sys

import pytest

BLOCK = r"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("lightning", "pytorch_lightning", "transformers", "mmengine"):
            raise ImportError(f"blocked {name}")
sys.meta_path.insert(0, Block())
import laptime, laptime.integrations
try:
    import laptime.integrations.%s
except ImportError as e:
    print(e)
else:
    print("imported")
"""


@pytest.mark.parametrize("extra", ["lightning", "transformers", "mmengine"])
def test_import_without_the_framework_names_the_extra(extra):
    r = subprocess.run([sys.executable, "-c", BLOCK % extra], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"pip install '<laptime checkout>[{extra}]'" in r.stdout


def test_laptime_integrations_needs_no_framework():
    r = subprocess.run([sys.executable, "-c", BLOCK % "__init__"], capture_output=True, text=True,
                       timeout=120)
    # laptime.integrations.__init__ is the package itself: imported without any framework.
    assert r.returncode == 0 and "imported" in r.stdout, r.stdout + r.stderr


def test_pytorch_lightning_alone_is_enough():
    pytest.importorskip("pytorch_lightning")
    script = r"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "lightning":
            raise ImportError(f"blocked {name}")
sys.meta_path.insert(0, Block())
import pytorch_lightning
from laptime.integrations.lightning import LaptimeCallback
assert issubclass(LaptimeCallback, pytorch_lightning.Callback)
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]
