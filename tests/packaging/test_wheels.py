"""The two wheels built from this tree, installed into a fresh venv outside the repository, as a user would.

hookwire-sdk (sdk/pyproject.toml) is what an extension author installs: extension_sdk with its test harness and the
proto/ contract, without the host or litellm. hookwire (pyproject.toml) is the host and depends on it.

Slow but honest: the wheels are built once and two venvs are made for the module, at the same time (the author's with
hookwire-sdk only, the host app's with hookwire); pip may reach the package registry for the dependencies. Each venv is
made without pip and filled by this interpreter's pip aimed at it (`pip --python`): what lands in site-packages is
what the venv's own pip would install, without ensurepip unpacking a pip into each (~17 s of wall under load).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "HOOKWIRE_"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _run(cmd: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)}\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
    return proc


@dataclass
class Wheels:
    sdk: Path
    host: Path


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    out = tmp_path_factory.mktemp("wheels")
    # Built from a copy of the tree (node_modules included, when `make node-deps` made it), so the build's
    # egg-info and build/ dirs never land in the checkout.
    tree = tmp_path_factory.mktemp("tree") / "hookwire"
    shutil.copytree(ROOT, tree, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "__pycache__", "build", "*.egg-info", "tests", "bench", ".pytest_cache", "*.db*"))
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
          str(tree), str(tree / "sdk")], cwd=out)
    (sdk,) = out.glob("hookwire_sdk-*.whl")
    (host,) = out.glob("hookwire-*.whl")
    return Wheels(sdk=sdk, host=host)


#: pip compiles every installed module to bytecode (litellm has thousands, its proxy server included): skipped,
#: each process then compiles only what it imports, once (the venv's __pycache__ is writable; _env() drops
#: PYTHONDONTWRITEBYTECODE). Halves pip's CPU here.
_FAST = ("--no-compile",)


@dataclass
class Venv:
    root: Path
    python: Path
    sdk_only_packages: set[str]  # what pip installed in it (for the author's venv: what hookwire-sdk brings)

    def bin(self, name: str) -> str:
        return str(self.root / "bin" / name)


def _pip(python: Path) -> list[str]:
    """pip run by this interpreter, installing into (or listing) the environment of `python` (pip >= 22.3)."""
    return [sys.executable, "-m", "pip", "--python", str(python)]


def _packages(python: Path, cwd: Path) -> set[str]:
    out = _run([*_pip(python), "list", "--format", "json"], cwd=cwd).stdout
    return {p["name"].lower() for p in json.loads(out)}


def _make_venv(root: Path, wheels: list[Path]) -> Venv:
    """A fresh venv at `root` (outside the repository) with `wheels` and pytest installed into it by pip."""
    venv.EnvBuilder(with_pip=False, clear=True).create(root)
    python = root / "bin" / "python"
    _run([*_pip(python), "install", "-q", *_FAST, *map(str, wheels), "pytest"], cwd=root.parent)
    return Venv(root=root, python=python, sdk_only_packages=_packages(python, root.parent))


@pytest.fixture(scope="module")
def venvs(wheels: Wheels, tmp_path_factory: pytest.TempPathFactory) -> tuple[Venv, Venv]:
    """(the author's venv: hookwire-sdk only; the host app's venv: hookwire, which brings hookwire-sdk), made at the
    same time: pip is mostly one busy core, and the suite leaves the other idle."""
    author_root = tmp_path_factory.mktemp("venv") / "author"
    host_root = tmp_path_factory.mktemp("venv") / "host"
    with ThreadPoolExecutor(max_workers=2) as pool:
        author = pool.submit(_make_venv, author_root, [wheels.sdk])
        host = pool.submit(_make_venv, host_root, [wheels.host, wheels.sdk])
        return author.result(), host.result()


@pytest.fixture(scope="module")
def author_venv(venvs: tuple[Venv, Venv]) -> Venv:
    """A fresh venv with only hookwire-sdk and pytest installed."""
    return venvs[0]


@pytest.fixture(scope="module")
def host_venv(venvs: tuple[Venv, Venv]) -> Venv:
    """A fresh venv with hookwire installed (its dependencies, hookwire-sdk among them, resolved by pip) and pytest."""
    return venvs[1]


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return z.namelist()


def test_the_sdk_wheel_carries_license_py_typed_and_the_proto_contract(wheels: Wheels) -> None:
    names = _names(wheels.sdk)
    assert "hookwire_sdk-0.1.0.dist-info/licenses/LICENSE" in names
    assert "extension_sdk/py.typed" in names
    assert {"extension_sdk/proto/hookwire/v1/extension.proto",
            "extension_sdk/proto/hookwire/v1/host_bridge.proto"} <= set(names)
    assert "extension_sdk/testing/pytest_plugin.py" in names
    assert not [n for n in names if n.startswith(("host/", "sample_extensions/"))]


def test_the_host_wheel_carries_license_py_typed_and_never_node_modules(wheels: Wheels) -> None:
    names = _names(wheels.host)
    assert "hookwire-0.1.0.dist-info/licenses/LICENSE" in names
    assert "host/py.typed" in names
    assert "sample_extensions/node_echo/index.js" in names
    assert [n for n in names if "node_modules" in n] == []
    assert not [n for n in names if n.startswith("extension_sdk/")]  # that is hookwire-sdk's


def test_an_author_installs_the_sdk_without_the_host_or_litellm(author_venv: Venv) -> None:
    installed = author_venv.sdk_only_packages
    assert "hookwire-sdk" in installed
    assert {"hookwire", "litellm", "pyyaml", "grpcio-tools"}.isdisjoint(installed)
    assert {"grpcio", "protobuf", "pydantic", "jsonschema"} <= installed


def test_an_authors_harness_test_passes_with_plain_pytest_in_the_sdk_only_venv(
    author_venv: Venv, tmp_path: Path
) -> None:
    (tmp_path / "shouty.py").write_text(
        "from extension_sdk import Extension\n"
        "ext = Extension('shouty', '1.0.0')\n"
        "@ext.tool(description='Shouts', parameters={'type': 'object', 'properties': {'text': {'type': 'string'}}})\n"
        "def shout(args, host):\n"
        "    host.sync.write_file('last.txt', args['text'])\n"
        "    return args['text'].upper() + '!'\n"
    )
    (tmp_path / "test_shouty.py").write_text(
        "from shouty import ext\n"
        "def test_shout(extension_harness):\n"
        "    h = extension_harness(ext)\n"
        "    assert h.call_tool('shout', {'text': 'hi'}) == 'HI!'\n"
        "    assert h.host.text('last.txt') == 'hi'\n"
    )
    proc = _run([str(author_venv.python), "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=tmp_path)
    assert "1 passed" in proc.stdout


def test_the_installed_host_runs_a_turn_with_an_installed_sample(host_venv: Venv, tmp_path: Path) -> None:
    site = _run([str(host_venv.python), "-c", "import sample_extensions, os; "
                 "print(os.path.dirname(sample_extensions.__file__))"], cwd=tmp_path).stdout.strip()
    assert not site.startswith(str(ROOT)), site
    proc = _run([host_venv.bin("hookwire"), "run", '/tool tools_calculator {"expression": "6*7"}',
                 "-e", f"{site}/tools/manifest.yaml", "--store", str(tmp_path / "s.db"),
                 "--workspace", str(tmp_path / "ws")], cwd=tmp_path, timeout=180)
    assert "tools_calculator -> 42" in proc.stdout


def test_the_installed_host_scaffolds_an_extension_whose_test_passes(host_venv: Venv, tmp_path: Path) -> None:
    out = _run([host_venv.bin("hookwire"), "ext", "new", "my-ext", "--dir", str(tmp_path / "my-ext")],
               cwd=tmp_path).stdout
    next_line = out.strip().splitlines()[-1]
    assert next_line == f"next: cd {tmp_path / 'my-ext'} && {host_venv.python} -m pytest -q"
    proc = _run(["sh", "-c", next_line.removeprefix("next: ")], cwd=tmp_path)
    assert "2 passed" in proc.stdout
