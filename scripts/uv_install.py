"""Install into a venv with uv, told what pip is configured with (scripts/setup.sh):

    python3 scripts/uv_install.py VENV_PYTHON UV TARGET

pip's settings come from `VENV_PYTHON -m pip config list`, whose values are Python reprs, one
`section.name=value` a line. pip ranks them environment (PIP_*, section ":env:") over the install
command's section over "global"; list options (extra-index-url, find-links, constraint,
trusted-host) hold whitespace-separated items, as pip splits them. Each setting is passed to uv
as the option that does the same; a setting this module does not know, or one uv cannot take
(no-index, pre, only-binary, ...), exits 3 without running uv, and pip installs instead, so uv
never installs what pip would not. The command is printed with any user:password in a URL
hidden. Exit status: uv's, or 3.
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

RANK = {"global": 0, "install": 1, ":env:": 2}
LISTS = {"extra-index-url": "--extra-index-url", "find-links": "--find-links",
         "constraint": "--constraint", "trusted-host": "--allow-insecure-host"}
# settings that change nothing uv resolves or installs
HARMLESS = {"disable-pip-version-check", "no-input", "progress-bar", "quiet", "verbose",
            "no-color", "root-user-action", "cache-dir", "no-cache-dir", "retries",
            "break-system-packages", "no-warn-script-location", "require-virtualenv"}
PIP_DEFERS = 3


def pip_settings(text: str) -> dict[str, str]:
    """{name: value} of `pip config list` output, each name's value from its highest-ranked
    section; other sections (another command's) are left out."""
    best: dict[str, tuple[int, str]] = {}
    for line in text.splitlines():
        key, sep, raw = line.partition("=")
        section, dot, name = key.rpartition(".")
        if not sep or not dot or section not in RANK:
            continue
        value = ast.literal_eval(raw)
        if name not in best or RANK[section] >= best[name][0]:
            best[name] = (RANK[section], str(value))
    return {name: value for name, (_, value) in best.items()}


def uv_arguments(settings: dict[str, str]) -> tuple[list[str], dict[str, str]] | None:
    """(uv options, environment additions) doing what pip's settings do; None where a setting
    has no uv equivalent here (pip installs then)."""
    args: list[str] = []
    env: dict[str, str] = {}
    for name, value in settings.items():
        if name == "index-url":
            args += ["--index-url", value.strip()]
        elif name in LISTS:
            for item in value.split():
                args += [LISTS[name], item]
        elif name in ("timeout", "default-timeout"):
            env["UV_HTTP_TIMEOUT"] = value.strip()
        elif name == "cert":
            env["SSL_CERT_FILE"] = value.strip()
        elif name not in HARMLESS:
            return None
    return args, env


def hidden(text: str) -> str:
    """`text` with the user:password of any URL in it replaced by ***."""
    return re.sub(r"(//)[^/@\s]+@", r"\1***@", text)


def main(argv: list[str]) -> int:
    venv_python, uv, target = argv
    listed = subprocess.run([venv_python, "-m", "pip", "config", "list"], capture_output=True,
                            text=True, check=False)
    try:
        settings = pip_settings(listed.stdout) if listed.returncode == 0 else {}
    except (ValueError, SyntaxError):
        print("setup: pip's settings could not be read; pip installs")
        return PIP_DEFERS
    made = uv_arguments(settings)
    if made is None:
        print(f"setup: pip has settings uv is not told here ({', '.join(sorted(settings))}); "
              f"pip installs")
        return PIP_DEFERS
    args, env = made
    # --compile-bytecode: as pip does (without it each of the tests' processes, xdist's and Ray's
    # workers, compiled the modules it imported again: the Ray tests took twice as long);
    # unsafe-best-match: each package's best version over every index, as pip picks it (uv's
    # default takes the first index that has the package)
    command = [uv, "pip", "install", "--python", venv_python, "--compile-bytecode",
               "--native-tls", "--index-strategy", "unsafe-best-match", *args, "-e", target]
    print("setup: " + hidden(" ".join(command)), flush=True)
    return subprocess.run(command, env={**os.environ, **env}, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
