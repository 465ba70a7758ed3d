"""Tests for the mcp:* task envs: the shop MCP server, the task catalog and `MCPTaskEnv`."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

pytest.importorskip("mcp", reason='the MCP SDK is not installed: pip install "gem-core[mcp]"')

import gem_core  # noqa: E402
from gem_core.envs.mcp_tasks.env import SEED_SQL, MCPTaskEnv, extract_answer  # noqa: E402
from gem_core.envs.mcp_tasks.tasks import (  # noqa: E402
    TASK_NAMES,
    TASKS,
    answers_match,
    final_answer,
    play_script,
    tool_call,
)
from gem_core.errors import ClosedEnvError  # noqa: E402

pytestmark = pytest.mark.timeout(120)

MCP_IDS = sorted(i for i in gem_core.registration.registry if i.startswith("mcp:"))


def server_pids(workdir: str) -> list[int]:
    """Live processes whose command line names ``workdir`` (the env's server)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if workdir.encode() in cmdline:
            pids.append(int(entry))
    return pids


@pytest.fixture(scope="module")
def env():
    env = gem_core.make("mcp:Mixed-v0")
    yield env
    env.close()


def product(env, sku: str) -> dict:
    obs, *_ = env.step(tool_call("get_product", sku=sku))
    return json.loads(obs)


# --- catalog and registry --------------------------------------------------------------
def test_registry_has_every_task_offline_and_a_mix_of_kinds():
    assert MCP_IDS == sorted([f"mcp:{n}-v0" for n in TASK_NAMES] + ["mcp:Mixed-v0"])
    assert len(TASK_NAMES) >= 12
    assert {t.kind for t in TASKS.values()} == {"lookup", "aggregate", "insert", "update"}
    for env_id in MCP_IDS:
        spec = gem_core.spec(env_id)
        assert spec.offline is True
        assert spec.kwargs["task"] in (*TASK_NAMES, None)


def test_importing_the_catalog_does_not_import_the_sdk():
    code = (
        "import sys, gem_core, gem_core.envs.mcp_tasks, gem_core.envs.mcp_tasks.tasks; "
        "print('mcp' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_seed_sql_is_reproduced_by_its_generator():
    path = SEED_SQL.with_name("make_seed.py")
    spec = importlib.util.spec_from_file_location("_gem_make_seed", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.render() == SEED_SQL.read_text(encoding="utf-8")


def test_answer_extraction_and_matching():
    assert extract_answer("x <answer>1</answer> y <answer> 2 </answer>") == "2"
    assert extract_answer(r"so \boxed{Lisbon}") == "Lisbon"
    assert extract_answer("<answer>unclosed") is None
    assert extract_answer("no answer here") is None
    start = time.perf_counter()
    assert extract_answer("<answer>" * 200_000) is None  # no quadratic rescans
    assert time.perf_counter() - start < 1.0
    assert answers_match("1,234 cents", 1234) and answers_match("$1234.", 1234)
    assert not answers_match("1235", 1234) and not answers_match("9" * 5000, 1234)
    assert answers_match(' "ada  BRENNAN". ', "Ada Brennan")
    assert not answers_match("Ada", "Ada Brennan")


def test_unknown_task_names_are_rejected_with_the_list():
    with pytest.raises(ValueError, match=r"unknown MCP task 'Nope'; expected one of CustomerCity"):
        MCPTaskEnv(task="Nope")


# --- the env over a real server -----------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1])
def test_reference_solutions_pass_and_wrong_ones_fail(env, seed):
    """Every task: the scripted reference passes; its near miss and a no-op both fail."""
    for name, task in TASKS.items():
        env.reset(seed=seed, options={"task": name})
        inst = env.unwrapped.instance
        reward, terminated, truncated, info, obs = play_script(env, task.solve(inst))
        assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True), (
            name,
            inst.prompt,
            obs,
        )
        used_tools = len(obs) - 1
        assert used_tools >= 1, f"{name}: the reference solution must go through the MCP tools"

        env.reset(seed=seed, options={"task": name})
        reward, terminated, _, info, obs = play_script(env, task.near_miss(env.unwrapped.instance))
        assert (reward, terminated, info["success"]) == (0.0, True, False), (name, inst.prompt, obs)

        env.reset(seed=seed, options={"task": name})
        noop = final_answer("done" if task.writes else "I do not know")
        _, reward, terminated, _, info = env.step(noop)
        assert (reward, terminated, info["success"]) == (0.0, True, False), name


def test_write_task_grading_checks_the_whole_database(env):
    """The requested change plus an unrelated one fails; the change alone passes."""
    env.reset(seed=3, options={"task": "Restock"})
    inst = env.unwrapped.instance
    script = TASKS["Restock"].solve(inst)
    action = next(script)
    obs, *_ = env.step(action)
    action = script.send(obs)  # the update_stock call
    env.step(action)
    env.step(tool_call("update_price", sku="TY-404", price_cents=999))
    obs, reward, terminated, _, info = env.step(final_answer("done"))
    assert (reward, terminated, info["success"]) == (0.0, True, False)
    assert obs == "The database is not in the requested state. The episode is over."


def test_each_reset_restores_the_seed_database(env):
    env.reset(seed=0, options={"task": "Restock"})
    before = product(env, "BK-101")
    obs, *_ = env.step(tool_call("update_stock", sku="BK-101", quantity=before["stock"] + 7))
    assert json.loads(obs)["stock"] == before["stock"] + 7
    assert product(env, "BK-101")["stock"] == before["stock"] + 7
    env.reset(seed=0, options={"task": "Restock"})
    assert product(env, "BK-101") == before
    # Orders placed in one episode are gone in the next.
    env.step(tool_call("add_order", customer_id=1, items=[{"sku": "BK-101", "quantity": 1}]))
    env.reset(seed=1)
    obs, *_ = env.step(tool_call("query", sql="SELECT COUNT(*) AS n FROM orders"))
    assert obs.splitlines()[1] == "36"


def test_reset_is_cheap(env):
    env.reset(seed=0)
    start = time.perf_counter()
    for seed in range(20):
        env.reset(seed=seed)
    assert (time.perf_counter() - start) / 20 < 0.1  # measured ~1 ms: a file copy, no restart


def test_query_is_read_only_and_bounded(env):
    env.reset(seed=0, options={"task": "OrderTotal"})
    for sql, message in [
        ("DELETE FROM orders", "query is read-only"),
        ("UPDATE products SET stock = 0", "query is read-only"),
        ("ATTACH DATABASE '/tmp/x.db' AS x", "query is read-only"),
        ("PRAGMA writable_schema = 1", "query is read-only"),
        ("SELECT 1; SELECT 2", "one statement at a time"),
        (
            "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT COUNT(*) FROM r",
            "ran too long",
        ),
    ]:
        obs, reward, terminated, truncated, info = env.step(tool_call("query", sql=sql))
        assert info["use_tool"] and info["tool_error"], sql
        assert message in obs, (sql, obs)
        assert (reward, terminated, truncated) == (0.0, False, False)
    obs, *_ = env.step(tool_call("query", sql="SELECT COUNT(*) AS n FROM orders"))
    assert obs == "n\n36\n(1 row)"


@pytest.fixture
def shop(tmp_path):
    from gem_core.envs.mcp_tasks.server import Shop

    db = tmp_path / "shop.db"
    conn = sqlite3.connect(db)
    conn.executescript(SEED_SQL.read_text(encoding="utf-8"))
    conn.close()
    return Shop(str(db))


def _doubled(n: int) -> str:
    """SQL building 'a' doubled n times (2**n bytes) with || only: no function needed."""
    return (
        "WITH RECURSIVE s(x, n) AS (SELECT 'a', 0 UNION ALL SELECT x || x, n + 1 FROM s "
        f"WHERE n < {n}) "
    )


def test_query_cannot_build_huge_values(shop):
    """Regression: one SQLite step can build a huge string or blob, which the step budget
    never sees (randomblob(9e8) took 5 s and 880 MB of the server's memory; one instr()
    over 1 MB values ran 11-17 s). Values are capped at what the shop's data needs."""
    from gem_core.envs.mcp_tasks.server import MAX_VALUE_BYTES, ShopError

    assert MAX_VALUE_BYTES == 2048  # the longest shop value is 287 bytes (a CREATE TABLE)
    for sql in [
        "WITH RECURSIVE s(x) AS (SELECT 'ab' UNION ALL SELECT x || x FROM s) SELECT length(x) FROM s",
        "SELECT length(group_concat(a.email)) FROM customers a, customers b, customers c",
        f"SELECT length('{'x' * 1500}' || '{'y' * 1500}')",
        _doubled(12) + "SELECT length(x) FROM s",
    ]:
        start = time.monotonic()
        with pytest.raises(ShopError, match=f"it built a value over {MAX_VALUE_BYTES} bytes"):
            shop.query(sql)
        assert time.monotonic() - start < 1.0, sql
    assert shop.query(_doubled(10) + "SELECT max(length(x)) AS n FROM s") == "n\n1024\n(1 row)"
    assert shop.query(f"SELECT length('{'x' * 2000}') AS n") == "n\n2000\n(1 row)"


REFUSED_FUNCTIONS = [
    ("SELECT fts3_tokenizer('simple')", "fts3_tokenizer"),  # leaks a native pointer
    ("SELECT hex(fts3_tokenizer('simple'))", "hex"),  # SQLite stops at the first refusal
    ("SELECT fts3_tokenizer('x', X'4141414141414141')", "fts3_tokenizer"),  # takes one
    ("SELECT length(randomblob(900000))", "randomblob"),
    ("SELECT instr(name, 'a') FROM customers", "instr"),
    ("SELECT zeroblob(10)", "zeroblob"),
    ("SELECT replace(name, 'a', 'b') FROM customers", "replace"),
    ("SELECT printf('%d', 1)", "printf"),
    ("SELECT load_extension('/tmp/x.so')", "load_extension"),
    ("SELECT sqlite_version()", "sqlite_version"),
    ("SELECT name FROM customers WHERE id = abs(random()) % 5", "random"),
]


@pytest.mark.parametrize(("sql", "function"), REFUSED_FUNCTIONS)
def test_query_allows_only_the_listed_functions(shop, sql, function):
    """Regression: any SQL function ran, e.g. fts3_tokenizer (a native pointer out, an
    arbitrary one accepted) and instr() over long values (seconds in one VM step)."""
    from gem_core.envs.mcp_tasks.server import ALLOWED_FUNCTIONS, ShopError

    start = time.monotonic()
    with pytest.raises(ShopError) as info:
        shop.query(sql)
    message = str(info.value)
    assert message.startswith(f"the SQL function {function}() is not allowed in query"), message
    assert message.endswith("; allowed functions: " + ", ".join(sorted(ALLOWED_FUNCTIONS)))
    assert time.monotonic() - start < 1.0


def test_the_listed_functions_work(shop):
    from gem_core.envs.mcp_tasks.server import ALLOWED_FUNCTIONS

    sql = (
        "SELECT count(*) AS n, sum(stock) AS s, total(stock) AS t, avg(price_cents) > 0 AS a, "
        "min(sku) AS lo, max(sku) AS hi, length(group_concat(sku)) > 0 AS g, "
        "lower('AB') || upper('cd') AS lu, length(name) > 0 AS len, substr('abc', 2) AS sub, "
        "substring('abc', 1, 1) AS sub2, coalesce(NULL, 1) AS c, ifnull(NULL, 2) AS i, "
        "nullif(1, 1) AS nu, iif(1, 'y', 'n') AS y, abs(-3) AS ab, round(2.5) AS r, "
        "typeof(1) AS ty, max(1, 2) AS mx, min(1, 2) AS mn, 'Kettle' LIKE 'k%' AS li, "
        "'Kettle' GLOB 'K*' AS gl, date('2024-03-01', '+1 day') AS d, time('12:00') AS tm, "
        "datetime('2024-03-01') AS dt, julianday('2024-03-02') - julianday('2024-03-01') AS jd, "
        "strftime('%Y', '2024-03-01') AS yr FROM products"
    )
    header, row, tail = shop.query(sql).splitlines()
    values = dict(zip(header.split(","), row.split(","), strict=True))
    assert values["lu"] == "abCD" and values["sub"] == "bc" and values["d"] == "2024-03-02"
    assert values["li"] == values["gl"] == "1" and values["jd"] == "1.0" and tail == "(1 row)"
    ranked = shop.query(
        "SELECT name, row_number() OVER (ORDER BY id) AS rn, rank() OVER (ORDER BY city) AS rk, "
        "dense_rank() OVER (ORDER BY city) AS dr FROM customers ORDER BY id LIMIT 1"
    )
    assert ranked.splitlines()[1].split(",")[1] == "1"
    assert {"count", "sum", "like"} <= ALLOWED_FUNCTIONS


HOSTILE_QUERIES = [
    # one instr() over ~1 MB values: 11 s in one VM step before (17 s on the report's box)
    _doubled(19)
    + "SELECT instr(x || substr(x, 1, 475000), substr(x, 1, 499999) || 'b') FROM s WHERE n = 19",
    "SELECT length(randomblob(900000))",
    _doubled(30) + "SELECT length(x) FROM s WHERE n = 30",
    "SELECT hex(fts3_tokenizer('simple'))",
]


@pytest.mark.parametrize("sql", HOSTILE_QUERIES, ids=["instr", "randomblob", "doubling", "fts3"])
def test_hostile_queries_are_quick_error_observations(env, sql):
    env.reset(seed=0, options={"task": "OrderTotal"})
    start = time.monotonic()
    obs, reward, terminated, truncated, info = env.step(tool_call("query", sql=sql))
    elapsed = time.monotonic() - start
    assert info["tool_error"], obs[:300]
    assert "not allowed in query" in obs or "it built a value over 2048 bytes" in obs, obs[:300]
    assert elapsed < 2.0, (elapsed, obs[:200])
    assert (reward, terminated, truncated) == (0.0, False, False)
    obs, *_ = env.step(tool_call("query", sql="SELECT COUNT(*) AS n FROM orders"))
    assert obs == "n\n36\n(1 row)"  # the same server, still answering


def test_server_rules_reach_the_agent_as_error_observations(env):
    env.reset(seed=0, options={"task": "PlaceOrder"})
    cases = [
        (
            tool_call("add_order", customer_id=1, items=[{"sku": "KT-202", "quantity": 40}]),
            "not enough stock of KT-202",
        ),
        (
            tool_call("update_order_status", order_id=1, status="lost"),
            "status must be one of pending",
        ),
        (tool_call("get_product", sku="XX-000"), "no product with sku 'XX-000'"),
        (tool_call("get_customer"), "give exactly one of customer_id or email"),
        (
            tool_call("add_customer", name="A B", email="ada.brennan@example.com", city="Graz"),
            "already exists (id 1)",
        ),
        (tool_call("no_such_tool"), "unknown tool 'no_such_tool'"),
        ('<tool_call>{"name": "query", "arguments": {</tool_call>', "could not read the tool call"),
    ]
    for action, message in cases:
        obs, reward, terminated, truncated, info = env.step(action)
        assert info["tool_error"] and message in obs, (action, obs)
        assert (reward, terminated, truncated) == (0.0, False, False)


def test_deeply_nested_tool_calls_are_error_observations(env):
    """Regression: ~100k nested brackets in a tool call raised RecursionError out of step."""
    env.reset(seed=0, options={"task": "OrderTotal"})
    for action in [
        "<tool_call>" + "[" * 100_000 + "</tool_call>",
        '<tool_call>{"name": "query", "arguments": {"sql": ' + "[" * 100_000,
        "<tool_call><tool_name>query</tool_name><arguments>" + "{" * 100_000 + "</arguments>",
    ]:
        obs, reward, terminated, truncated, info = env.step(action)
        assert obs.startswith("MCP error: could not read the tool call: "), obs[:200]
        assert "levels deep; at most 64 levels are allowed" in obs, obs[:200]
        assert info["use_tool"] and info["tool_error"]
        assert (reward, terminated, truncated) == (0.0, False, False)
    obs, *_ = env.step(tool_call("query", sql="SELECT COUNT(*) AS n FROM orders"))
    assert obs == "n\n36\n(1 row)"  # the server is still fine


@pytest.mark.parametrize("stage", ["parse", "execute"])
def test_a_tool_that_raises_is_an_error_observation(env, monkeypatch, stage):
    """Regression: MCPTaskEnv called tool.parse/execute unguarded (the Tool contract says
    they never raise, but a subclass or a bug may)."""
    env.reset(seed=0, options={"task": "OrderTotal"})
    tool = env.unwrapped.tool

    def boom(*_):
        raise RuntimeError(f"{stage} bug")

    monkeypatch.setattr(tool, stage, boom)
    obs, reward, terminated, truncated, info = env.step(tool_call("list_tables"))
    assert obs == f"MCP error: the tool call failed: RuntimeError: {stage} bug"
    assert info["use_tool"] and info["tool_error"] and info["turn"] == 1
    assert (reward, terminated, truncated) == (0.0, False, False)
    monkeypatch.undo()
    obs, *_ = env.step(tool_call("query", sql="SELECT COUNT(*) AS n FROM orders"))
    assert obs == "n\n36\n(1 row)"


def test_a_killed_server_is_restarted_on_the_same_episode_database(env):
    env.reset(seed=0, options={"task": "Restock"})
    env.step(tool_call("update_stock", sku="GD-303", quantity=77))
    workdir = env.unwrapped.workdir
    (pid,) = server_pids(workdir)
    os.kill(pid, signal.SIGKILL)
    observations = []
    for _ in range(2):  # at most one call reports the lost connection
        obs, reward, terminated, truncated, info = env.step(tool_call("get_product", sku="GD-303"))
        observations.append(obs)
        assert (reward, terminated, truncated) == (0.0, False, False)
        if not info["tool_error"]:
            break
    assert json.loads(observations[-1])["stock"] == 77, observations
    assert len(observations) == 1 or "connection to the server was lost" in observations[0]
    assert server_pids(workdir) not in ([], [pid])


def test_format_errors_retry_then_the_turn_limit_truncates(env):
    env.reset(seed=0, options={"task": "CustomerCity"})
    for turn in range(1, 25):
        action = [None, "", "thinking...", "<answer>unclosed"][turn % 4]
        obs, reward, terminated, truncated, info = env.step(action)
        assert info["format_error"] and info["invalid_action"] and not terminated
        assert "Format error: no tool call and no final answer found" in obs
        assert reward == 0.0 and info["turn"] == turn
        assert truncated == (turn == 24)
    assert "turn limit (24)" in obs
    with pytest.raises(gem_core.errors.ResetNeeded):
        env.step(final_answer("Lisbon"))


def test_format_error_terminate_mode(env):
    inner = env.unwrapped
    inner.format_error = "terminate"
    try:
        env.reset(seed=0, options={"task": "CustomerCity"})
        _, reward, terminated, truncated, info = env.step("no tags at all")
        assert (reward, terminated, truncated, info["success"]) == (0.0, True, False, False)
    finally:
        inner.format_error = "retry"


def test_unknown_task_in_reset_options(env):
    with pytest.raises(ValueError, match=r"reset\(options=\{'task': 'Nope'\}\) names no MCP task"):
        env.reset(seed=0, options={"task": "Nope"})


def test_mixed_draws_different_tasks_per_seed(env):
    names = {env.reset(seed=s)[1]["task"] for s in range(12)}
    assert len(names) >= 5
    assert env.reset(seed=5)[0] == env.reset(seed=5)[0]


def test_every_id_builds_without_starting_a_server_and_closes_cleanly():
    for env_id in MCP_IDS:
        env = gem_core.make(env_id)
        workdir = env.unwrapped.workdir
        assert env.unwrapped.task_name == gem_core.spec(env_id).kwargs["task"]
        assert os.path.isdir(workdir) and server_pids(workdir) == []  # started lazily
        env.close()
        assert not os.path.exists(workdir)


# check_env on *every* registered id (mcp:* included) is tests/test_checker.py::
# test_check_env_all_registered; each costs a server start (~1 s CPU), so here it runs on
# the mixed id (all tasks under many seeds), one read id and one write id.
@pytest.mark.parametrize(
    "env_id", ["mcp:Mixed-v0", "mcp:TopCustomer-v0", "mcp:ShipPendingOrders-v0"]
)
def test_check_env_and_no_leaked_server(env_id):
    env = gem_core.make(env_id)
    workdir = env.unwrapped.workdir
    env.reset(seed=0)
    assert len(server_pids(workdir)) == 1  # the detection below can fail
    gem_core.check_env(env, warn=False)  # ends with close() twice
    assert server_pids(workdir) == []
    assert not os.path.exists(workdir)
    with pytest.raises(ClosedEnvError, match="is closed"):
        env.unwrapped.reset(seed=0)


def test_a_lone_surrogate_in_a_tool_argument_is_refused_and_the_session_survives():
    """Regression (hostile output, part 2): a JSON ``\\udcff`` escape in an argument killed the
    server connection (each such call cost a restart)."""
    env = gem_core.make("mcp:CustomerCity-v0")
    try:
        env.reset(seed=0)
        obs, *_, info = env.step('<tool_call>{"name": "get_product", "arguments": {"sku": "\\udcff"}}</tool_call>')
        assert "not valid text" in obs and "connection" not in obs, obs
        assert info["tool_error"] is True
        obs, *_, info = env.step('<tool_call>{"name": "list_tables", "arguments": {}}</tool_call>')
        assert "customers" in obs and info["tool_error"] is False, obs
    finally:
        env.close()


def test_query_cpu_is_bounded_whatever_each_step_costs(shop):
    """Regression (hostile output, part 2): a GLOB with character classes over 2 KB values,
    in a recursive CTE of allowed functions only, ran the whole step budget (5 s quiet)."""
    from gem_core.envs.mcp_tasks.server import QUERY_CPU_SECONDS, ShopError

    value = "substr(upper(lower('" + "a" * 1000 + "')) || upper(lower('" + "a" * 1000 + "')), 1 + n % 2, 2000)"
    pattern = ("*[a-b]" * 20 + "c")[:100]
    sql = f"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r WHERE {value} GLOB '{pattern}'"
    start = time.thread_time()
    with pytest.raises(ShopError, match="more than 1 s of CPU"):
        shop.query(sql)
    assert time.thread_time() - start < QUERY_CPU_SECONDS + 1.0
