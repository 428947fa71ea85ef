"""The install lines README.md and docs/CLIENTS.md give, run as written in a copy of the tree.

A user on Debian follows them from a fresh clone; pip's and Debian's ways of
failing (externally-managed-environment, a build that needs a package index,
another python3 on PATH) are what they must get past, so the test runs the
documented shell lines themselves rather than its own equivalent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

from tests.node import REPO


def install_lines(doc: Path, heading: str) -> str:
    """The first ```sh block after heading in doc."""
    text = doc.read_text()
    start = text.index("```sh\n", text.index(heading)) + len("```sh\n")
    return text[start : text.index("```", start)]


class DocumentedInstallTest(unittest.TestCase):
    def test_the_documented_install_lines_work_in_a_fresh_tree(self) -> None:
        readme = install_lines(REPO / "README.md", "### Python")
        clients = install_lines(REPO / "docs" / "CLIENTS.md", "## Python")
        self.assertEqual(readme, clients, "README.md and docs/CLIENTS.md give different install lines")
        self.assertIn("./clients/python", readme)

        tree = Path(tempfile.mkdtemp(prefix="agentstate-install-"))
        self.addCleanup(shutil.rmtree, tree, ignore_errors=True)
        # What a fresh clone holds of the client: no build output of earlier runs.
        shutil.copytree(
            REPO / "clients" / "python",
            tree / "clients" / "python",
            ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", ".venv"),
        )
        # The user's shell, not this test's: no PYTHONPATH reaching the source
        # tree, no venv of the test run active.
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"  # no index lookup for a newer pip
        run = subprocess.run(["sh", "-ec", readme], cwd=tree, env=env, capture_output=True, text=True, timeout=600)
        self.assertEqual(run.returncode, 0, f"install lines failed:\n{readme}\n{run.stdout}\n{run.stderr}")

        # Imported from elsewhere, so only the installed package can be found.
        python = tree / ".venv" / "bin" / "python"
        probe = "import agentstate, grpc; from agentstate import Client; print(agentstate.__file__)"
        got = subprocess.run([str(python), "-c", probe], cwd="/", env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(got.returncode, 0, got.stderr)
        where = Path(got.stdout.strip()).resolve()
        self.assertTrue(
            str(where).startswith(str((tree / ".venv").resolve())), f"agentstate imported from {where}, not the venv"
        )


if __name__ == "__main__":
    unittest.main()
