"""Benchmark: pytest-crucible beside its peers on one trivial golden set (issue 35).

Run from the repository root:

    .venv/bin/python bench/bench_peers.py [--items N] [--repeat R] [--peers deepeval,promptfoo]
                                          [--peer-python PATH] [--promptfoo CMD] [--deepeval-run-max-items N]
                                          [--timeout S] [--keep-logs DIR]

Workload: the golden items and the in-memory pipeline of ``bench_overhead.py`` (imported, not
copied): N items (default 10,000) with 1-2 chunk-level citations each; the "pipeline" is a dict
lookup returning 10 precomputed chunks, about two thirds of the items have a cited chunk among
them. Every tool scores one LLM-free retrieval metric per item, lets every item pass (the score is
recorded, not gated) and stores its results where it stores them by default. Timed, on the same
machine, interleaved, best of R:

* bare pytest (the floor): ``pytest test_bare.py -p no:crucible``, one test parametrized over the
  items calling the pipeline (``bench_overhead.py``'s bare module, unchanged);
* pytest-crucible: ``pytest golden_bench.jsonl --crucible-mode=component --crucible-outcome=record``
  into a fresh SQLite file (it scores Recall@K, Precision@K, MRR, nDCG@10 and Hit@K, all stored);
* DeepEval, its pytest integration: a test module parametrized over the same items; each test calls
  the same pipeline, builds an ``LLMTestCase`` (the retrieved chunk ids as ``retrieval_context``)
  and calls ``assert_test`` with a custom ``BaseMetric`` (Recall@10 of the cited chunks, threshold
  0, no LLM). Run twice: ``deepeval test run test_deepeval.py --display failing`` (the documented
  way; it saves the run in ``.deepeval/``; ``--display failing`` keeps it from printing a
  10,000-row table, and no item fails), and plain ``pytest test_deepeval.py`` with DeepEval's
  plugin (auto-loaded; it evaluates the metric but saves nothing). Under ``deepeval test run``
  every test reloads and rewrites the run's whole temporary JSON file, so its time grows with the
  square of N: above ``--deepeval-run-max-items`` (default 2,000) that variant is skipped with a
  line saying so (time it with ``--items 1000``);
* promptfoo: ``promptfoo eval -c promptfooconfig.json`` with the same items as tests, the built-in
  ``echo`` provider (the prompt is the item's retrieved chunk ids, so the "answer" is the
  pipeline's fixed output) and one ``javascript`` assertion in ``defaultTest`` (the same
  Recall@10, always passing), results written to its SQLite store (a fresh ``PROMPTFOO_CONFIG_DIR``
  per run). Run twice: with its defaults, which include a debug log file, and with
  ``PROMPTFOO_DISABLE_DEBUG_LOG=1``: in promptfoo 0.121 that log's writer can crash ("write after
  end", exit status 1) or time out at shutdown after a large eval, losing the printed summary
  (the results are stored by then; the script counts them in the store either way).

Reported per run: wall time, CPU time (user + system from ``os.wait4``, which includes the
child's own waited-for children), peak RSS (``ru_maxrss``), the number of items the tool said
passed and, where it stores results, the number of stored results; then best-of-R ratios of each
tool to bare pytest and of each peer to pytest-crucible. A run that did not pass all N items is
flagged. Every child gets one untimed warm-up run at 50 items first (fills the bytecode caches,
which go to the temp dir through PYTHONPYCACHEPREFIX); when ``strace`` is on PATH the warm-up runs
under ``strace -f -e trace=connect`` and the script prints any connection that was not local
(loopback or a Unix socket).

No child may reach the network. The peers' children get, in their environment: DeepEval:
``DEEPEVAL_TELEMETRY_OPT_OUT=YES``, ``DEEPEVAL_DISABLE_DOTENV=1``,
``DEEPEVAL_DISABLE_LEGACY_KEYFILE=1``, ``DEEPEVAL_HOME`` in the temp dir, no
``DEEPEVAL_UPDATE_WARNING_OPT_IN`` and no ``CONFIDENT_API_KEY`` (so no Confident AI upload);
promptfoo: ``PROMPTFOO_DISABLE_TELEMETRY=1``, ``PROMPTFOO_DISABLE_UPDATE=1``,
``PROMPTFOO_DISABLE_SHARING=1``, ``PROMPTFOO_DISABLE_REMOTE_GENERATION=1``,
``PROMPTFOO_DISABLE_REDTEAM_REMOTE_GENERATION=1``, a fresh ``PROMPTFOO_CONFIG_DIR`` (no cloud login)
and ``PROMPTFOO_CACHE_PATH`` in the temp dir. Both also get ``HTTP(S)_PROXY`` pointing at a closed
port on 127.0.0.1, an empty ``NO_PROXY`` and ``npm_config_offline=true`` (for npx): promptfoo 0.121 still posts one "telemetry disabled"
event when telemetry is disabled, and this sends it nowhere. An absent peer is skipped with a line
saying how to install it; the script never fails because of one.

Installing the peers (outside this repository; DeepEval must not go into the project's venv):

    python3 -m venv /tmp/peers-venv && /tmp/peers-venv/bin/pip install deepeval pytest
    npm install --prefix /tmp/peers-npm promptfoo
    .venv/bin/python bench/bench_peers.py --peer-python /tmp/peers-venv/bin/python \\
        --promptfoo /tmp/peers-npm/node_modules/.bin/promptfoo

It reports, it never fails: the exit code is 0 whenever the script itself ran.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_overhead as overhead  # the same items, pipeline, bare module and commands

WARMUP_ITEMS = 50
CLOSED_PORT_PROXY = "http://127.0.0.1:9"  # nothing listens there: a request through it fails at once, locally

DEEPEVAL_TEST = '''
import json
from pathlib import Path

import pytest
from deepeval import assert_test
from deepeval.metrics import BaseMetric
from deepeval.test_case import LLMTestCase

CONFIG = {"retrievalLimit": 10}
ITEMS = [json.loads(line) for line in (Path(__file__).parent / "golden_bench.jsonl").read_text().splitlines() if line]


class RecallAt10(BaseMetric):
    """Share of the item's cited chunks among the first 10 retrieved; no LLM. Threshold 0: every
    item passes and its score is recorded (as --crucible-outcome=record)."""

    def __init__(self, cited):
        self.cited = cited
        self.threshold = 0.0
        self.async_mode = False
        self.include_reason = False

    def measure(self, test_case, *args, **kwargs):
        retrieved = set(test_case.retrieval_context[:10])
        self.score = sum(1 for chunk in self.cited if chunk in retrieved) / len(self.cited)
        self.success = self.score >= self.threshold
        return self.score

    async def a_measure(self, test_case, *args, **kwargs):
        return self.measure(test_case)

    def is_successful(self):
        return bool(self.success)

    @property
    def __name__(self):
        return "Recall@10"


@pytest.mark.parametrize("item", ITEMS, ids=[item["id"] for item in ITEMS])
def test_item(item, crucible_pipeline):
    result = crucible_pipeline(item["question"], item=item, config=CONFIG, mode="component")
    case = LLMTestCase(input=item["question"], actual_output="",
                       retrieval_context=[chunk["chunk_id"] for chunk in result["retrieved"]])
    assert_test(case, [RecallAt10([citation["chunkId"] for citation in item["citations"] if "chunkId" in citation])])
'''

# One assertion for every test (defaultTest): Recall@10 of the cited chunks in the echoed output.
PROMPTFOO_ASSERTION = """const retrieved = output.split('\\n').slice(0, 10);
const cited = context.vars.cited.split('\\n');
const score = cited.filter((chunk) => retrieved.includes(chunk)).length / cited.length;
return { pass: true, score, reason: 'recall@10 ' + score };"""

DEEPEVAL_ENV = {
    "DEEPEVAL_TELEMETRY_OPT_OUT": "YES",
    "DEEPEVAL_DISABLE_DOTENV": "1",
    "DEEPEVAL_DISABLE_LEGACY_KEYFILE": "1",
}
DEEPEVAL_UNSET = ("DEEPEVAL_UPDATE_WARNING_OPT_IN", "CONFIDENT_API_KEY", "CONFIDENT_BASE_URL", "DEEPEVAL_RESULTS_FOLDER")
PROMPTFOO_ENV = {
    "PROMPTFOO_DISABLE_TELEMETRY": "1",
    "PROMPTFOO_DISABLE_UPDATE": "1",
    "PROMPTFOO_DISABLE_SHARING": "1",
    "PROMPTFOO_DISABLE_REMOTE_GENERATION": "1",
    "PROMPTFOO_DISABLE_REDTEAM_REMOTE_GENERATION": "1",
}
PROMPTFOO_UNSET = ("PROMPTFOO_API_KEY", "PROMPTFOO_REMOTE_API_BASE_URL", "PROMPTFOO_REMOTE_APP_BASE_URL", "PROMPTFOO_SHARE_URL")
OFFLINE_ENV = dict.fromkeys(("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"), CLOSED_PORT_PROXY)
OFFLINE_ENV.update({"NO_PROXY": "", "no_proxy": "", "npm_config_offline": "true"})


class Tool:
    """One variant to time: its command, folder, environment, and how to count what it stored."""

    def __init__(self, key: str, label: str, argv: list[str], cwd: Path, env: dict[str, str], version: str,
                 fresh=None, stored=None):
        self.key, self.label, self.argv, self.cwd, self.env, self.version = key, label, argv, cwd, env, version
        self.fresh = fresh or (lambda rep: ([], {}))  # per repetition: (extra args, extra env)
        self.stored = stored  # (rep) -> number of stored results, or None when the tool stores nothing
        self.runs: list[dict] = []


def run(argv: list[str], cwd: Path, log: Path, env: dict[str, str], timeout: float | None = None) -> dict:
    """Wall s, CPU s (user + system, the child and its waited-for children), peak RSS MB, exit code."""
    with open(log, "wb") as out:
        started = time.perf_counter()
        try:
            proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        except OSError as error:
            out.write(f"could not start {argv[0]}: {error}\n".encode())
            return {"wall": 0.0, "cpu": 0.0, "rss": 0.0, "rc": 127}
        deadline = None if timeout is None else started + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG if deadline else 0)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                _pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss / 1024.0, "rc": proc.returncode}


def last_line(log: Path) -> str:
    """The tool's closing summary line, without colours."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in log.read_text(errors="replace").splitlines()]
    lines = [line for line in lines if line]
    summary = [line for line in lines if re.search(r"\d+ passed", line)]
    return (summary or lines or ["(no output)"])[-1].strip("= ")


def passed_count(log: Path) -> int | None:
    """Items the tool itself reported as passed: pytest's "N passed", promptfoo's "✓ N passed"."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", log.read_text(errors="replace"))
    counts = re.findall(r"(\d[\d,]*) passed", text)  # promptfoo writes 10,000
    return int(counts[-1].replace(",", "")) if counts else None


def probe(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 180.0) -> tuple[bool, str]:
    try:
        done = subprocess.run(argv, check=False, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as error:
        return False, str(error)
    lines = [line.strip() for line in (done.stdout + "\n" + done.stderr).splitlines() if line.strip()]
    wanted = [line for line in lines if re.match(r"^(deepeval )?\d+\.\d+", line)]  # a version among node's warnings
    return done.returncode == 0, (wanted or lines or [""])[0 if wanted else -1]


def default_peer_python() -> str:
    """The interpreter of a `deepeval` command on PATH, else this one."""
    command = shutil.which("deepeval")
    if command:
        first = Path(command).read_bytes()[:300].split(b"\n", 1)[0].decode(errors="replace")
        if first.startswith("#!") and " " not in first[2:].strip():
            return first[2:].strip()
    return sys.executable


def default_promptfoo() -> list[str] | None:
    if shutil.which("promptfoo"):
        return [shutil.which("promptfoo")]
    if shutil.which("npx"):
        return [shutil.which("npx"), "--no-install", "promptfoo"]
    return None


def child_env(base: dict[str, str], extra: dict[str, str], unset: tuple[str, ...] = ()) -> dict[str, str]:
    env = {**base, **extra}
    for name in unset:
        env.pop(name, None)
    return env


def write_promptfoo_config(directory: Path, n_items: int) -> None:
    """The same items as promptfoo tests: the pipeline's fixed output becomes the echoed prompt."""
    namespace: dict = {}
    exec(compile(overhead.PIPELINE_SOURCE.format(n_items=n_items), "pipeline", "exec"), namespace)
    tests = []
    for i in range(n_items):
        item = namespace["make_item"](i)
        retrieved = namespace["RESULTS"][item["question"]][:10]
        tests.append({"description": item["id"], "vars": {
            "question": item["question"],
            "retrieved": "\n".join(chunk["chunk_id"] for chunk in retrieved),
            "cited": "\n".join(c["chunkId"] for c in item["citations"] if "chunkId" in c),  # strings: a list would expand
        }})
    config = {
        "description": f"bench_peers: {n_items} trivial golden items",
        "prompts": ["{{retrieved}}"],
        "providers": ["echo"],
        "defaultTest": {"assert": [{"type": "javascript", "metric": "recall@10", "value": PROMPTFOO_ASSERTION}]},
        "tests": tests,
    }
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "promptfooconfig.json").write_text(json.dumps(config))


def build(base: Path, n_items: int, peers: set[str]) -> dict[str, Path]:
    plugin_dir, bare_dir = overhead.build(base, n_items)
    dirs = {"plugin": plugin_dir, "bare": bare_dir}
    if "deepeval" in peers:
        deepeval_dir = base / "deepeval"
        deepeval_dir.mkdir()
        for name in ("pytest.ini", "conftest.py", "golden_bench.jsonl"):
            shutil.copy(bare_dir / name, deepeval_dir / name)
        (deepeval_dir / "test_deepeval.py").write_text(DEEPEVAL_TEST)
        dirs["deepeval"] = deepeval_dir
    if "promptfoo" in peers:
        write_promptfoo_config(base / "promptfoo", n_items)
        dirs["promptfoo"] = base / "promptfoo"
    return dirs


def deepeval_stored(directory: Path) -> int | None:
    """Test cases in the run DeepEval saved (.deepeval/.latest_run_full.json, its default JSON store)."""
    path = directory / ".deepeval" / ".latest_run_full.json"
    if not path.exists():
        return 0
    data = json.loads(path.read_text())
    run_data = data.get("testRun", data) if isinstance(data, dict) else {}
    cases = run_data.get("testCases") or run_data.get("test_cases") or []
    return len(cases)


def promptfoo_stored(config_dir: Path) -> int | None:
    """Passing results in promptfoo's SQLite store."""
    db = config_dir / "promptfoo.db"
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COUNT(*) FROM eval_results WHERE success = 1").fetchone()[0]


def crucible_stored(db: Path) -> int | None:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]


def make_tools(opts, tmp: Path, dirs: dict[str, Path], base_env: dict[str, str], peer_info: dict) -> list[Tool]:
    py = overhead.PY
    tools = [
        Tool("bare", "bare pytest (floor)", [py, *overhead.bare_cmd()], dirs["bare"], base_env, peer_info["pytest"]),
        Tool("crucible", "pytest-crucible", [py], dirs["plugin"], base_env, peer_info["crucible"]),
    ]
    crucible = tools[1]
    crucible.fresh = lambda rep, d=dirs["plugin"]: (overhead.plugin_cmd(d, d / f"run-{rep}.db"), {})
    crucible.stored = lambda rep, d=dirs["plugin"]: crucible_stored(d / f"run-{rep}.db")
    if "deepeval" in dirs and peer_info.get("deepeval"):
        env = child_env(base_env, {**DEEPEVAL_ENV, **OFFLINE_ENV, "DEEPEVAL_HOME": str(tmp / "deepeval-home")}, DEEPEVAL_UNSET)
        d = dirs["deepeval"]
        cli = peer_info["deepeval_cli"]
        run_tool = Tool("deepeval", "deepeval test run", [*cli, "test", "run", "test_deepeval.py", "--display", "failing",
                                                          "-p", "no:cacheprovider"], d, env, peer_info["deepeval"])

        def fresh(rep, d=d):
            shutil.rmtree(d / ".deepeval", ignore_errors=True)  # a fresh local store for every run
            return [], {}

        run_tool.fresh = fresh
        run_tool.stored = lambda rep, d=d: deepeval_stored(d)
        if opts.items <= opts.deepeval_run_max_items:
            tools.append(run_tool)
        plain = Tool("deepeval-pytest", "pytest + deepeval plugin", [opts.peer_python, "-m", "pytest", "test_deepeval.py",
                                                                     "-p", "no:cacheprovider", "-q"], d, env, peer_info["deepeval"])
        tools.append(plain)
    if "promptfoo" in dirs and peer_info.get("promptfoo"):
        env = child_env(base_env, {**PROMPTFOO_ENV, **OFFLINE_ENV, "PROMPTFOO_CACHE_PATH": str(tmp / "promptfoo-cache")},
                        PROMPTFOO_UNSET)
        d = dirs["promptfoo"]
        argv = [*peer_info["promptfoo_cmd"], "eval", "-c", "promptfooconfig.json"]
        # Its default (a debug log file in the config dir), and without that log: promptfoo 0.121's logger
        # can crash or time out at shutdown after a large eval (results stored, summary lost).
        for key, label, extra in (("promptfoo", "promptfoo eval", {}),
                                  ("promptfoo-nolog", "promptfoo eval, no debug log", {"PROMPTFOO_DISABLE_DEBUG_LOG": "1"})):
            tool = Tool(key, label, argv, d, {**env, **extra}, peer_info["promptfoo"])

            def fresh_pf(rep, d=d, key=key):
                home = d / f"home-{key}-{rep}"
                shutil.rmtree(home, ignore_errors=True)
                return [], {"PROMPTFOO_CONFIG_DIR": str(home)}

            tool.fresh = fresh_pf
            tool.stored = lambda rep, d=d, key=key: promptfoo_stored(d / f"home-{key}-{rep}")
            tools.append(tool)
    return tools


def detect_peers(opts, peers: set[str], base_env: dict[str, str], tmp: Path) -> dict:
    import pytest  # versions for the report only

    import pytest_crucible

    info: dict = {"pytest": f"pytest {pytest.__version__}",
                  "crucible": f"pytest-crucible {getattr(pytest_crucible, '__version__', '?')}"}
    if "deepeval" in peers:
        env = child_env(base_env, {**DEEPEVAL_ENV, **OFFLINE_ENV, "DEEPEVAL_HOME": str(tmp / "deepeval-home")}, DEEPEVAL_UNSET)
        code = "import deepeval, pytest; print('deepeval', deepeval.__version__, 'pytest', pytest.__version__)"
        ok, line = probe([opts.peer_python, "-c", code], env, tmp)
        if ok and line.startswith("deepeval "):
            info["deepeval"] = line
            script = Path(opts.peer_python).parent / "deepeval"
            info["deepeval_cli"] = [str(script)] if script.exists() else [
                opts.peer_python, "-c", "import sys; from deepeval.cli.main import app; sys.argv[0] = 'deepeval'; app()"]
        else:
            print(f"deepeval: skipped, not importable by {opts.peer_python} ({line or 'no output'}). Install it outside this "
                  "repository's venv: python3 -m venv /tmp/peers-venv && /tmp/peers-venv/bin/pip install deepeval pytest, "
                  "then pass --peer-python /tmp/peers-venv/bin/python")
    if "promptfoo" in peers:
        command = shlex.split(opts.promptfoo) if opts.promptfoo else default_promptfoo()
        if command and "/" in command[0]:
            command[0] = os.path.abspath(command[0])
        env = child_env(base_env, {**PROMPTFOO_ENV, **OFFLINE_ENV, "PROMPTFOO_CONFIG_DIR": str(tmp / "promptfoo-probe")},
                        PROMPTFOO_UNSET)
        ok, line = (False, "no promptfoo on PATH and no npx") if command is None else probe([*command, "--version"], env, tmp)
        if ok and re.match(r"^\d+\.\d+", line):
            info["promptfoo"] = f"promptfoo {line} (node {probe(['node', '--version'], env, tmp)[1].lstrip('v')})"
            info["promptfoo_cmd"] = command
        else:
            print(f"promptfoo: skipped, `{' '.join(command or ['promptfoo'])} --version` failed ({line or 'no output'}). "
                  "Install it: npm install --prefix /tmp/peers-npm promptfoo, then pass "
                  "--promptfoo /tmp/peers-npm/node_modules/.bin/promptfoo")
    return info


def network_check(tool: Tool, tmp: Path, log: Path) -> str:
    """Connections the warm-up run attempted other than Unix sockets and loopback (from strace)."""
    trace = tmp / f"strace-{tool.key}.txt"
    if not trace.exists():
        return "not checked (no strace)"
    remote = set()
    for line in trace.read_text(errors="replace").splitlines():
        if "connect(" not in line or "AF_UNIX" in line or "AF_NETLINK" in line:
            continue
        address = re.search(r'inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)"', line)
        host = next((group for group in (address.groups() if address else ()) if group), None)
        port = re.search(r"htons\((\d+)\)", line)
        if host is None or not (host.startswith("127.") or host in ("::1", "::ffff:127.0.0.1")):
            remote.add(f"{host}:{port.group(1) if port else '?'}")
    return "only loopback or Unix sockets" if not remote else "NON-LOCAL connect() attempts: " + ", ".join(sorted(remote))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--peers", default="deepeval,promptfoo", help="comma-separated: deepeval, promptfoo (or none)")
    parser.add_argument("--peer-python", default=None,
                        help="a python where deepeval and pytest are installed (default: that of `deepeval` on PATH, else this one)")
    parser.add_argument("--promptfoo", default=None,
                        help="the promptfoo command (default: promptfoo on PATH, else `npx --no-install promptfoo`)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds before one timed run is killed")
    parser.add_argument("--deepeval-run-max-items", type=int, default=2000,
                        help="skip `deepeval test run` above this many items (its time grows with the square of N)")
    parser.add_argument("--keep-logs", metavar="DIR", type=Path, help="copy every child's output (warm-up and timed) to DIR")
    opts = parser.parse_args()
    opts.peer_python = opts.peer_python or default_peer_python()
    if "/" in opts.peer_python:  # children run in temp folders; keep a venv's symlink unresolved
        opts.peer_python = os.path.abspath(opts.peer_python)
    peers = {name.strip() for name in opts.peers.split(",") if name.strip() and name.strip() != "none"}
    unknown = peers - {"deepeval", "promptfoo"}
    if unknown:
        print(f"unknown peers ignored: {', '.join(sorted(unknown))}")
        peers -= unknown

    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, {platform.machine()}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="crucible-peers-") as name:
        tmp = Path(name)
        base_env = dict(os.environ)
        for variable in ("PYTHONDONTWRITEBYTECODE", "PYTEST_ADDOPTS"):
            base_env.pop(variable, None)
        base_env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        info = detect_peers(opts, peers, base_env, tmp)
        if info.get("deepeval") and opts.items > opts.deepeval_run_max_items:
            print(f"deepeval test run: skipped at {opts.items} items (> --deepeval-run-max-items {opts.deepeval_run_max_items}): "
                  "under `deepeval test run` every test reloads and rewrites the whole run's temporary JSON file, so its "
                  "time grows with the square of the item count (hours at 10,000); time it with --items 1000. "
                  "Plain pytest with DeepEval's plugin is still timed.")
        print("versions: " + "; ".join(info[key] for key in ("pytest", "crucible", "deepeval", "promptfoo") if key in info))
        print(f"workload: {opts.items} golden items (1-2 citations each), in-memory pipeline returning 10 chunks, one "
              f"LLM-free retrieval metric per item, results stored; best of {opts.repeat}, interleaved")

        # Untimed warm-up at 50 items, under strace when there is one: bytecode caches, and the network check.
        warm = tmp / "warm"
        warm.mkdir()
        warm_tools = make_tools(opts, warm, build(warm, WARMUP_ITEMS, peers), base_env, info)
        strace = shutil.which("strace")
        print(f"warm-up ({WARMUP_ITEMS} items, untimed{', under strace -f -e trace=connect' if strace else ''}):")
        for tool in warm_tools:
            extra_args, extra_env = tool.fresh(0)
            argv = [*tool.argv, *extra_args]
            if strace:
                argv = [strace, "-f", "-qq", "-e", "trace=connect", "-o", str(warm / f"strace-{tool.key}.txt"), *argv]
            result = run(argv, tool.cwd, warm / f"{tool.key}.log", {**tool.env, **extra_env}, opts.timeout)
            passed = passed_count(warm / f"{tool.key}.log")
            print(f"  {tool.label:28s} rc={result['rc']}  passed {passed}/{WARMUP_ITEMS}  network: "
                  f"{network_check(tool, warm, warm / f'{tool.key}.log')}")
            if result["rc"] != 0:
                print("    " + "\n    ".join(last_line(warm / f"{tool.key}.log").splitlines()))

        base = tmp / "timed"
        base.mkdir()
        started = time.perf_counter()
        dirs = build(base, opts.items, peers)
        print(f"workload written in {time.perf_counter() - started:.1f} s")
        tools = make_tools(opts, base, dirs, base_env, info)
        for rep in range(1, opts.repeat + 1):
            for tool in tools:
                extra_args, extra_env = tool.fresh(rep)
                log = base / f"{tool.key}-{rep}.log"
                result = run([*tool.argv, *extra_args], tool.cwd, log, {**tool.env, **extra_env}, opts.timeout)
                result["passed"] = passed_count(log)
                result["stored"] = tool.stored(rep) if tool.stored else None
                tool.runs.append(result)
                flag = "" if result["passed"] == opts.items else f"  <-- NOT all {opts.items} items passed"
                flag += "" if result["rc"] == 0 else f"  <-- exit status {result['rc']}"
                stored = "-" if result["stored"] is None else str(result["stored"])
                print(f"  rep {rep} {tool.label:28s} {result['wall']:8.2f} s  cpu {result['cpu']:8.2f} s  peak RSS "
                      f"{result['rss']:7.1f} MB  rc={result['rc']}  passed {result['passed']}  stored {stored}"
                      f"  [{last_line(log)[:70]}]{flag}", flush=True)
                if result["rc"] not in (0,):
                    print("    last lines: " + " | ".join(log.read_text(errors="replace").splitlines()[-5:])[:600])
        if opts.keep_logs:
            opts.keep_logs.mkdir(parents=True, exist_ok=True)
            for log in [*warm.glob("*.log"), *warm.glob("strace-*.txt")]:
                shutil.copy(log, opts.keep_logs / f"warmup-{log.name}")
            for log in base.glob("*.log"):
                shutil.copy(log, opts.keep_logs / log.name)

    report(tools, opts.items)
    return 0


def report(tools: list[Tool], n_items: int) -> None:
    best = {}
    for tool in tools:
        ok = [r for r in tool.runs if r["rc"] == 0] or tool.runs
        best[tool.key] = {"wall": min(r["wall"] for r in ok), "cpu": min(r["cpu"] for r in ok), "rss": max(r["rss"] for r in ok),
                          "passed": min((r["passed"] or 0) for r in ok),
                          "stored": None if ok[0]["stored"] is None else min(r["stored"] for r in ok)}
    bare, crucible = best["bare"], best["crucible"]
    print(f"\nbest of {len(tools[0].runs)} (wall and CPU: the lowest; RSS: the highest), {n_items} items:")
    print(f"  {'tool':28s} {'wall s':>8s} {'cpu s':>8s} {'RSS MB':>7s} {'passed':>7s} {'stored':>7s}"
          f" {'wall/bare':>9s} {'cpu/bare':>8s} {'wall/crucible':>13s} {'cpu/crucible':>12s} {'ms/item':>8s}")
    for tool in tools:
        b = best[tool.key]
        stored = "-" if b["stored"] is None else str(b["stored"])
        vs_crucible = (f"{b['wall'] / crucible['wall']:13.2f} {b['cpu'] / crucible['cpu']:12.2f}"
                       if tool.key not in ("bare", "crucible") else f"{'':13s} {'':12s}")
        print(f"  {tool.label:28s} {b['wall']:8.2f} {b['cpu']:8.2f} {b['rss']:7.1f} {b['passed']:7d} {stored:>7s}"
              f" {b['wall'] / bare['wall']:9.2f} {b['cpu'] / bare['cpu']:8.2f} {vs_crucible} {b['wall'] / n_items * 1000:8.3f}")
    for tool in tools:
        b = best[tool.key]
        if b["passed"] != n_items:
            stored = "" if b["stored"] is None else f"; its store holds {b['stored']} passing results"
            print(f"  {tool.label}: did not print '{n_items} passed' (printed: {b['passed'] or 'no count'}){stored}")
    print("  (stored: crucible's results rows; deepeval test run's test cases in .deepeval/.latest_run_full.json; "
          "promptfoo's passing eval_results rows; '-': that variant stores nothing)")


if __name__ == "__main__":
    sys.exit(main())
