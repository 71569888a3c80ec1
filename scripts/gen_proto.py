"""Generate the Python protobuf/gRPC modules from proto/ into extension_sdk/proto/.

    python scripts/gen_proto.py            # write the generated modules
    python scripts/gen_proto.py --check    # exit 1 if the committed modules differ from proto/

Imports between generated modules are rewritten to relative imports so the modules live inside
the `extension_sdk.proto` package (the one place generated code lives; the host imports it too).
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
OUT_DIR = ROOT / "extension_sdk" / "proto"
IMPORT_RE = re.compile(r"^from hookwire\.v1 import (\w+)", re.MULTILINE)


def generate(into: Path) -> dict[str, str]:
    protos = sorted(str(p.relative_to(PROTO_DIR)) for p in PROTO_DIR.rglob("*.proto"))
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_DIR}",
        f"-I{include}",
        f"--python_out={into}",
        f"--pyi_out={into}",
        f"--grpc_python_out={into}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    files: dict[str, str] = {}
    for path in sorted((into / "hookwire" / "v1").glob("*.py*")):
        text = IMPORT_RE.sub(r"from . import \1", path.read_text())
        files[path.name] = text
    return files


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = generate(Path(tmp))
    if opts.check:
        drift = False
        names = set(files) | {p.name for p in OUT_DIR.glob("*_pb2*.py*")}
        for name in sorted(names):
            want = files.get(name, "")
            have = (OUT_DIR / name).read_text() if (OUT_DIR / name).exists() else ""
            if want != have:
                drift = True
                sys.stdout.writelines(
                    difflib.unified_diff(have.splitlines(True), want.splitlines(True), f"committed/{name}", f"generated/{name}")
                )
        if drift:
            print("proto-check: generated code differs from proto/ — run `make proto`", file=sys.stderr)
            return 1
        print(f"proto-check: {len(files)} generated files match proto/")
        return 0
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (OUT_DIR / name).write_text(text)
    print(f"wrote {len(files)} files to {OUT_DIR.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
