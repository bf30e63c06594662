# SPDX-License-Identifier: BSD-3-Clause
"""`meson install` puts the package where Debian's /usr/bin/python3
imports it: an install of the package's files (tag python-runtime) into a
DESTDIR lands in one directory that is on that Python's sys.path for the
build's prefix, and the installed copy imports from there and reduces."""
import json
import os
import subprocess
import sys

import pytest

BUILD = os.environ.get("TALLY_BUILD", "")


def _prefix():
    """The build's configured prefix (meson-info)."""
    with open(os.path.join(BUILD, "meson-info", "intro-buildoptions.json")) as f:
        return next(o["value"] for o in json.load(f) if o["name"] == "prefix")


def test_install_where_python_imports(tmp_path):
    if not BUILD:
        pytest.skip("TALLY_BUILD not set")
    r = subprocess.run(["meson", "install", "-C", BUILD, "--no-rebuild",
                        "--destdir", str(tmp_path), "--tags",
                        "python-runtime"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    files = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path)
             for f in fs]
    names = sorted(os.path.basename(f) for f in files)
    assert names[0] == "__init__.py" and names[1].startswith("_tally.") \
        and names[2:] == ["backend.py", "torch.py"], names
    pkg = {os.path.dirname(f) for f in files}
    assert len(pkg) == 1, pkg
    pkg = pkg.pop()
    site = os.path.dirname(pkg)[len(str(tmp_path)):]
    prefix = _prefix().rstrip("/") + "/"
    assert os.path.basename(pkg) == "tally" and site.startswith(prefix)
    # The Python this runs under is /usr/bin/python3 (meson's py3): its
    # own sys.path, which it has whether or not the directory exists.
    assert sys.executable == "/usr/bin/python3"
    out = subprocess.run(["/usr/bin/python3", "-c",
                          "import sys; print('\\n'.join(sys.path))"],
                         capture_output=True, text=True, check=True).stdout
    assert site in out.split("\n"), (site, out)
    # The installed copy (not the build tree's) imports and works.
    env = dict(os.environ, PYTHONPATH=os.path.dirname(pkg))
    code = ("import numpy as np, tally, tally.torch; "
            "import torch.distributed as d; "
            "assert 'TALLY' in d.Backend._plugins; "
            "print(tally.__file__); print(tally._tally.__file__); "
            "print(tally.backend.__file__)")
    out = subprocess.run(["/usr/bin/python3", "-c", code], env=env,
                         capture_output=True, text=True, check=True,
                         cwd=str(tmp_path)).stdout.split()
    assert all(o.startswith(pkg + "/") for o in out), out
