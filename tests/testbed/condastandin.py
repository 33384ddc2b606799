"""A recording stand-in for conda 26.7 and micromamba 2.x (no real binary can be fetched here).

It logs every call (argv, and whether CONDA_OVERRIDE_CUDA / CONDA_CHANNEL_ALIAS were set; never a
secret's value) and answers in the engines' real output formats, copied in shape from their sources
and documentation:
- `--version`: conda prints `conda 26.7.1`, micromamba the bare `2.0.5`;
- `create --dry-run --json`: `{"actions": {"FETCH": [...], "LINK": [...], "PREFIX": ...}, "dry_run":
  true, "prefix": ..., "success": true}` (conda/cli/install.py `handle_txn` -> `stdout_json_success`;
  micromamba prints the same keys);
- failures: conda's `CondaHTTPError: HTTP 401 UNAUTHORIZED for url <...>` with its "invalid
  credentials" paragraph, `UnavailableInvalidChannel: HTTP 404 NOT FOUND for channel ...`,
  `PackagesNotFoundInChannelsError: The following packages are not available from current channels:` +
  `  - spec` (conda 25+/26.7's name; `"error_name": "PackagesNotFoundError"` gives the older one), as
  text or as the JSON error object under --json; mode "other": any `Name: message` error envkit has no
  rule for; micromamba's `critical libmamba ...` lines,
  `Download error (22) ... The requested URL returned error: 401` and
  `└─ spec does not exist (perhaps a typo or a missing channel).`
- a successful create writes conda-meta/<name>-<version>-<build>.json records and conda-meta/history.

The behaviour of one test is set in `scenario.json` next to the script: {"mode": "ok" | "401" | "404" |
"missing" | "other", "plan": [records], "missing": [specs], "error_name": str, "message": str}.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

SCRIPT = r'''
import json, os, sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENGINE = Path(sys.argv[0]).name
args = sys.argv[1:]
scenario = json.loads((HERE / "scenario.json").read_text())
with open(HERE / "calls.jsonl", "a") as log:
    alias = os.environ.get("CONDA_CHANNEL_ALIAS")
    log.write(json.dumps({"engine": ENGINE, "argv": args, "cuda": os.environ.get("CONDA_OVERRIDE_CUDA"),
                          "alias_set": alias is not None, "alias_has_userinfo": bool(alias and "@" in alias)}) + "\n")
if args == ["--version"]:
    print("conda 26.7.1" if ENGINE == "conda" else "2.0.5")
    sys.exit(0)

def opt(flag):
    return args[args.index(flag) + 1] if flag in args else None

prefix = opt("-p")
as_json = "--json" in args
mode = scenario.get("mode", "ok")
url = scenario.get("url", "https://mirror.example/conda-forge")
if "-f" in args:
    (HERE / "seen.yml").write_text(Path(opt("-f")).read_text())

def fail(text, payload):
    if as_json:
        print(json.dumps(payload, indent=2))
    else:
        print(text, file=sys.stderr)
    sys.exit(1)

if mode == "401":
    if ENGINE == "micromamba":
        fail("error    libmamba Error while downloading " + url + "/linux-64/repodata.json\n"
             "critical libmamba Multiple errors occurred:\n"
             "    Download error (22) HTTP response code said error [" + url + "/linux-64/repodata.json]\n"
             "    The requested URL returned error: 401\n", {"success": False})
    text = ("Channels:\n - " + url + "\nPlatform: linux-64\nCollecting package metadata (repodata.json): failed\n\n"
            "CondaHTTPError: HTTP 401 UNAUTHORIZED for url <" + url + "/linux-64/repodata.json>\n"
            "Elapsed: 00:00.012345\n\n"
            "The remote server has indicated you are using invalid credentials for this channel.\n\n"
            "If the remote site is anaconda.org or follows the Anaconda API, you\n"
            "may need to authenticate with a token: conda token set\n")
    fail(text, {"caused_by": "None", "error": "CondaHTTPError: HTTP 401 UNAUTHORIZED for url <" + url
                + "/linux-64/repodata.json>", "exception_name": "CondaHTTPError", "status_code": 401,
                "url": url + "/linux-64/repodata.json"})
if mode == "404":
    if ENGINE == "micromamba":
        fail("critical libmamba Multiple errors occurred:\n"
             "    Download error (22) HTTP response code said error [" + url + "x/noarch/repodata.json]\n"
             "    The requested URL returned error: 404\n", {"success": False})
    text = ("UnavailableInvalidChannel: HTTP 404 NOT FOUND for channel conda-forgex <" + url + "x>\n\n"
            "The channel is not accessible or is invalid.\n\n"
            "You will need to adjust your conda configuration to proceed.\n"
            "Use `conda config --show channels` to view your configuration's current state,\n"
            "and use `conda config --show-sources` to view config file locations.\n")
    fail(text, {"error": text.splitlines()[0], "exception_name": "UnavailableInvalidChannel", "status_code": 404})
if mode == "missing":
    missing = scenario.get("missing", [])
    if ENGINE == "micromamba":
        fail("error    libmamba Could not solve for environment specs\n"
             "    The following package could not be installed\n"
             + "".join("    └─ " + m + " does not exist (perhaps a typo or a missing channel).\n" for m in missing)
             + "critical libmamba Could not solve for environment specs\n", {"success": False})
    name = scenario.get("error_name", "PackagesNotFoundInChannelsError")  # conda 26.7's; older: ...NotFoundError
    text = ("Channels:\n - conda-forge\nPlatform: linux-64\nCollecting package metadata (repodata.json): done\n"
            "Solving environment: failed\n\n"
            + name + ": The following packages are not available from current channels:\n\n"
            + "".join("  - " + m + "\n" for m in missing)
            + "\nCurrent channels:\n\n  - " + url + "\n\n"
            "To search for alternate channels that may provide the conda package you're\nlooking for, navigate to\n\n"
            "    https://anaconda.org\n\nand use the search bar at the top of the page.\n")
    fail(text, {"error": text.split("\n\n", 1)[1].split("\n")[0], "exception_name": name,
                "packages": missing, "channel_urls": [url]})
if mode == "other":  # an error envkit has no rule for: conda's own `Name: message` line and JSON
    name, message = scenario["error_name"], scenario["message"]
    fail("Channels:\n - conda-forge\nPlatform: linux-64\n\n" + name + ": " + message + "\n",
         {"error": name + ": " + message, "exception_name": name})

plan = scenario.get("plan", [])
if "--dry-run" in args:
    link = [dict(r, base_url=r["channel"], platform=r["subdir"], dist_name=r["fn"][:-6]) for r in plan]
    print(json.dumps({"actions": {"FETCH": plan, "LINK": link, "PREFIX": prefix}, "dry_run": True,
                      "prefix": prefix, "success": True}, indent=2))
    sys.exit(0)
meta = Path(prefix) / "conda-meta"
meta.mkdir(parents=True)
print("Channels:\n - conda-forge\nPlatform: linux-64\nCollecting package metadata (repodata.json): done\n"
      "Solving environment: done\n\nDownloading and Extracting Packages:\n\nPreparing transaction: done\n"
      "Verifying transaction: done\nExecuting transaction: done")
for r in plan:
    (meta / (r["fn"].rsplit(".conda", 1)[0] + ".json")).write_text(json.dumps(dict(r, files=[])))
(meta / "history").write_text("==> 2026-11-30 10:00:00 <==\n# cmd: " + ENGINE + " " + " ".join(args)
                              + "\n# conda version: 26.7.1\n")
'''


def record(name: str, version: str, build: str, subdir: str = "linux-64", channel: str =
           "https://conda.anaconda.org/conda-forge") -> dict[str, object]:
    fn = f"{name}-{version}-{build}.conda"
    content = f"{channel}/{subdir}/{fn}".encode()  # stands for the archive: real digests, distinct per file
    return {"name": name, "version": version, "build": build, "build_number": 0, "channel": channel,
            "subdir": subdir, "fn": fn, "url": f"{channel}/{subdir}/{fn}", "size": 1000, "depends": [],
            "sha256": hashlib.sha256(content).hexdigest(), "md5": hashlib.md5(content).hexdigest()}


def install(bindir: Path, engine: str, scenario: dict[str, object]) -> Path:
    """Write the stand-in as `bindir/engine` with its scenario; returns the executable."""
    bindir.mkdir(parents=True, exist_ok=True)
    exe = bindir / engine
    exe.write_text(f"#!{sys.executable}\n" + SCRIPT)
    exe.chmod(0o755)
    (bindir / "scenario.json").write_text(json.dumps(scenario))
    return exe


def calls(bindir: Path) -> list[dict[str, object]]:
    path = bindir / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
