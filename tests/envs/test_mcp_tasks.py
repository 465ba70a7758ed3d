"""Tests for the mcp:* task envs: the shop MCP server, the task catalog and `MCPTaskEnv`."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
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


def test_query_cannot_build_huge_values(tmp_path):
    """Regression: one SQLite step can build a huge string or blob, which the step budget
    never sees (randomblob(9e8) took 5 s and 880 MB of the server's memory)."""
    import sqlite3

    from gem_core.envs.mcp_tasks.server import MAX_VALUE_BYTES, Shop, ShopError

    db = tmp_path / "shop.db"
    conn = sqlite3.connect(db)
    conn.executescript(SEED_SQL.read_text(encoding="utf-8"))
    conn.close()
    shop = Shop(str(db))
    for sql in [
        f"SELECT length(randomblob({MAX_VALUE_BYTES + 1}))",
        f"SELECT length(hex(randomblob({MAX_VALUE_BYTES // 2 + 1})))",
        f"SELECT length(group_concat(randomblob({MAX_VALUE_BYTES // 4}))) FROM products a, products b",
    ]:
        start = time.monotonic()
        with pytest.raises(ShopError, match=f"a value over {MAX_VALUE_BYTES} bytes"):
            shop.query(sql)
        assert time.monotonic() - start < 1.0, sql
    assert shop.query(f"SELECT length(randomblob({MAX_VALUE_BYTES}))").startswith("length(")


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
