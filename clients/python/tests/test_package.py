"""The package: versioned with the daemon, and a wheel that builds offline with the standard
backend and works in a fresh venv without httpx."""

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import authgate_client
from test_client import daemon  # noqa: F401  (the fixture: a daemon with a signed-in mock session)

PACKAGE = Path(__file__).resolve().parents[1]
REPO = PACKAGE.parents[1]


def test_the_version_is_the_daemons(daemon):  # noqa: F811
    swift = (REPO / "Sources/AuthGateCore/Version.swift").read_text()
    [declared] = re.findall(r'static let current = "([^"]+)"', swift)
    assert authgate_client.__version__ == declared
    assert importlib.metadata.version("authgate-client") == declared, "the installed distribution's version"
    assert daemon.info()["version"] == declared, "daemon.info of the built authgated"


def test_the_wheel_builds_offline_and_installs_into_a_fresh_venv(daemon):  # noqa: F811
    work = Path(tempfile.mkdtemp(prefix="agwh-", dir="/tmp"))
    try:
        # A copy, so that no build/ left in the tree by an older build can slip into the wheel.
        source = work / "source"
        shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "tests"))
        offline = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                        "-w", str(work / "dist"), str(source)], env=offline, check=True)
        [wheel] = (work / "dist").iterdir()
        assert wheel.name == f"authgate_client-{authgate_client.__version__}-py3-none-any.whl"

        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(work / "venv")], check=True)
        python = work / "venv" / "bin" / "python"
        subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                        str(wheel)], env=offline, check=True)
        check = (
            "import authgate_client, sys\n"
            "assert authgate_client.__file__.startswith(sys.prefix), authgate_client.__file__\n"
            "assert 'httpx' not in sys.modules\n"
            "token = authgate_client.Client(sys.argv[1]).token('mock')\n"
            "assert token.token_type == 'Bearer'\n"
            "try:\n"
            "    authgate_client.HTTPXAuth\n"
            "except ImportError as error:\n"
            "    assert 'pip install httpx' in str(error)\n"
            "else:\n"
            "    raise AssertionError('httpx is not in this venv')\n"
            "print('ok')\n")
        answer = subprocess.run([str(python), "-c", check, daemon.socket_path], capture_output=True, text=True)
        assert answer.returncode == 0 and answer.stdout == "ok\n", answer.stderr[-2000:]
    finally:
        shutil.rmtree(work, ignore_errors=True)
