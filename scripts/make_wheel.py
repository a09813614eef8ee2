"""Packs greentrain's wheel from a CMake build tree, with the standard library only (no
network, no rebuild): the Python package (python/greentrain), the extension module
(BUILD/python/greentrain/_core*.so) and the program (BUILD/src/cli/greentrain, as
greentrain/_bin/greentrain), with a console entry point `greentrain` (greentrain._cli:main).

    python3 scripts/make_wheel.py BUILD_DIR OUT_DIR

The wheel's tag is this interpreter's (cp311-cp311) and this machine's platform (linux_x86_64):
the program and the module link the shared libraries of the Debian packages in
scripts/apt-packages.txt, so the wheel installs where those are (any machine set up with
scripts/install-deps.sh), not on any Linux (it is not a manylinux wheel). Wheel format:
PEP 427 (zip, .dist-info with METADATA, WHEEL, entry_points.txt, RECORD with sha256)."""

import base64
import hashlib
import pathlib
import re
import sys
import sysconfig
import zipfile

NAME, VERSION = "greentrain", "0.1.0"


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def main() -> int:
    if len(sys.argv) != 3:
        sys.stderr.write("usage: make_wheel.py BUILD_DIR OUT_DIR\n")
        return 2
    root = pathlib.Path(__file__).resolve().parent.parent
    build, out = pathlib.Path(sys.argv[1]).resolve(), pathlib.Path(sys.argv[2]).resolve()
    suffix = sysconfig.get_config_var("EXT_SUFFIX")  # .cpython-311-x86_64-linux-gnu.so
    module = build / "python" / "greentrain" / ("_core" + suffix)
    program = build / "src" / "cli" / "greentrain"
    for f, what in ((module, "the extension module (target greentrain_core)"),
                    (program, "the program (target greentrain)")):
        if not f.is_file():
            sys.stderr.write(f"make_wheel.py: {f} is missing: build {what} in {build} first, for "
                             f"this interpreter ({sys.executable}, {suffix})\n")
            return 1
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    plat = re.sub(r"[^A-Za-z0-9]", "_", sysconfig.get_platform())
    tag = f"{py}-{py}-{plat}"
    files = []  # (name in the wheel, bytes, executable)
    pkg = root / "python" / "greentrain"
    for f in sorted(pkg.rglob("*")):
        if f.is_file() and f.suffix in (".py", ".typed") and "__pycache__" not in f.parts:
            files.append(("greentrain/" + f.relative_to(pkg).as_posix(), f.read_bytes(), False))
    files.append(("greentrain/" + module.name, module.read_bytes(), False))
    files.append(("greentrain/_bin/greentrain", program.read_bytes(), True))
    info = f"{NAME}-{VERSION}.dist-info"
    readme = (root / "README.md").read_text(encoding="utf-8")
    metadata = (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n"
                "Summary: Energy meter (J, W, gCO2e per window), power-limit optimizer and the "
                "greentrain program\nRequires-Python: >=3.9\n"
                "License: MIT\nProvides-Extra: test\nRequires-Dist: pytest; extra == \"test\"\n"
                "Description-Content-Type: text/markdown\n\n" + readme)
    wheel = (f"Wheel-Version: 1.0\nGenerator: greentrain scripts/make_wheel.py\n"
             f"Root-Is-Purelib: false\nTag: {tag}\n")
    entry = "[console_scripts]\ngreentrain = greentrain._cli:main\n"
    files += [(f"{info}/METADATA", metadata.encode(), False), (f"{info}/WHEEL", wheel.encode(), False),
              (f"{info}/entry_points.txt", entry.encode(), False)]
    lic = root / "LICENSE"
    if lic.is_file():
        files.append((f"{info}/LICENSE", lic.read_bytes(), False))
    record = "".join(f"{n},{record_hash(d)},{len(d)}\n" for n, d, _ in files) + f"{info}/RECORD,,\n"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{NAME}-{VERSION}-{tag}.whl"
    tmp = path.with_suffix(".whl.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for n, d, exe in files + [(f"{info}/RECORD", record.encode(), False)]:
            zi = zipfile.ZipInfo(n, date_time=(2024, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = ((0o755 if exe else 0o644) | 0o100000) << 16
            z.writestr(zi, d)
    tmp.replace(path)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
