"""Tests for tau:Retail-v0: every task's reference passes and near miss fails; policy and bad input."""

from __future__ import annotations

import json
import sqlite3
import time
import warnings

import pytest

import gem_core
from gem_core.checker import check_env
from gem_core.envs.tau.data import ORDERS, USERS, build_seed_database
from gem_core.envs.tau.domain import MAX_STRING_CHARS, Retail
from gem_core.envs.tau.env import (
    MAX_MESSAGE_CHARS,
    RetailEnv,
    make_retail_env,
    output_said,
    parse_tool_call,
)
from gem_core.envs.tau.policy import is_affirmative
from gem_core.envs.tau.tasks import TASK_NAMES, TASKS, reference_script, tool_call
from gem_core.errors import InvalidArgument, ResetNeeded
from gem_core.multiagent import STOP_TOKEN, ScriptedUser, as_single_agent

IDS = ("tau:Retail-v0", "tau:Retail-v0-hard")


def _view(tasks="all", **kwargs):
    return as_single_agent(RetailEnv(tasks, **kwargs), "assistant", {"user": ScriptedUser()})


def _play(env, task, script, seed=0, max_steps=80):
    obs, info = env.reset(seed=seed, options={"task": task})
    observations = [obs]
    action = next(script)
    for _ in range(max_steps):
        obs, reward, terminated, truncated, info = env.step(action)
        observations.append(obs)
        if terminated or truncated:
            return reward, terminated, truncated, info, observations
        action = script.send(obs)
    raise AssertionError(f"{task}: no end in {max_steps} steps")


def _authed(env, task="CancelHeadphones"):
    """Reset on ``task`` and authenticate its user; returns the env."""
    env.reset(seed=0, options={"task": task})
    user = TASKS[task].user_id
    email = next(u[3] for u in USERS if u[0] == user)
    obs, *_ = env.step("Could you tell me the email address of your account?")
    assert email in obs, obs  # the user gives it: authentication uses what the user said
    obs, *_, info = env.step(tool_call("find_user_id_by_email", email=email))
    assert info["policy_violation"] is None, obs
    return env


# --- the catalog ------------------------------------------------------------------------
def test_the_catalog_has_at_least_30_tasks_of_both_levels():
    levels = [t.level for t in TASKS.values()]
    assert len(TASKS) >= 30, len(TASKS)
    assert levels.count("base") >= 15 and levels.count("hard") >= 10, levels


@pytest.mark.parametrize("name", TASK_NAMES)
def test_every_expected_write_is_valid_on_the_seed(name):
    """An authoring slip (an action the tools refuse) would make a task unsolvable."""
    conn = sqlite3.connect(":memory:")
    build_seed_database(conn)
    task = TASKS[name]
    retail = Retail(conn)
    for tool, arguments in task.writes:
        assert json.loads(retail.call(tool, arguments, session_user=task.user_id))
    conn.close()


@pytest.mark.parametrize("on_violation", ["refuse", "terminate"])
@pytest.mark.parametrize("name", TASK_NAMES)
def test_reference_passes_and_near_miss_fails(name, on_violation):
    env = _view(on_violation=on_violation)
    reward, terminated, truncated, info, _ = _play(env, name, reference_script(TASKS[name]))
    assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True), info
    assert info["failed_check"] is None and info["checks"] == {"database": True, "outputs": True, "transfer": True}
    reward, terminated, truncated, info, _ = _play(env, name, reference_script(TASKS[name], near_miss=True))
    assert (reward, truncated, info["success"]) == (0.0, False, False), info
    assert info["failed_check"] in ("database", "outputs", "transfer", "policy"), info
    assert info["failure"], info
    env.close()


def test_a_near_miss_says_which_check_failed():
    env = _view()
    _, _, _, info, _ = _play(env, "CancelHeadphones", reference_script(TASKS["CancelHeadphones"], near_miss=True))
    assert info["failed_check"] == "database"
    assert info["failure"].startswith("table orders: expected row ('#R1002'"), info["failure"]
    _, _, _, info, _ = _play(env, "OrderTotal", reference_script(TASKS["OrderTotal"], near_miss=True))
    assert (info["failed_check"], info["failure"]) == ("outputs", "the assistant never said '37.00'")
    _, _, _, info, _ = _play(env, "LateDeliveryTransfer", reference_script(TASKS["LateDeliveryTransfer"], near_miss=True))
    assert info["failed_check"] == "transfer" and "needs a transfer" in info["failure"]


def test_the_scripted_user_drives_complete_episodes_and_ends_with_the_stop_token():
    env = _view()
    _, _, _, info, observations = _play(env, "CancelThenReturn", reference_script(TASKS["CancelThenReturn"]))
    assert info["end_reason"] == "user_stop"
    assert observations[0].startswith("# Retail customer-service policy")
    assert "User: Hi, I want to cancel my pending headphones order #R1002" in observations[0]
    assert "User: My email is ava.moore@example.com." in observations
    assert any("return the T-shirt from order #R1001" in o for o in observations)
    assert observations[-1].endswith("The user ended the conversation.")
    assert STOP_TOKEN not in observations[-1]


# --- through gem_core.make ---------------------------------------------------------------
# tests/test_checker.py runs check_env on every registered id; this adds what it does not
# check: the tau ids raise none of check_env's soft notes (warnings are errors) and are quick.
@pytest.mark.parametrize("env_id", IDS)
def test_registered_ids_pass_check_env_quickly(env_id):
    env = gem_core.make(env_id)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env)
    assert time.perf_counter() - start < 20  # about 0.5 s; generous for a loaded box


def test_seeds_pick_tasks_reproducibly_and_options_pick_one():
    env = gem_core.make("tau:Retail-v0")
    first = [env.reset(seed=s)[1]["task"] for s in range(6)]
    assert first == [env.reset(seed=s)[1]["task"] for s in range(6)]
    assert len(set(first)) > 1
    assert all(TASKS[t].level == "base" for t in first)
    assert env.reset(options={"task": "OrderTotal"})[1]["task"] == "OrderTotal"
    env.close()


def test_the_vector_envs_work_through_the_single_agent_view():
    envs = gem_core.make_vec("tau:Retail-v0", num_envs=2, vectorization_mode="sync")
    obs, infos = envs.reset(seed=3)
    assert len(obs) == 2 and all("Retail customer-service policy" in o for o in obs)
    obs, rewards, terminated, truncated, infos = envs.step(["Could you give me your email?"] * 2)
    assert all(o.startswith("User: ") for o in obs), obs
    envs.close()


def test_unknown_user_specs_and_tasks_are_clear_errors():
    with pytest.raises(InvalidArgument, match="expected 'scripted', a mapping"):
        make_retail_env(user="gpt")
    with pytest.raises(InvalidArgument, match="unknown task name"):
        RetailEnv(["NoSuchTask"])
    with pytest.raises(InvalidArgument, match="expected 'base', 'hard', 'all'"):
        RetailEnv("medium")


# --- policy violations -------------------------------------------------------------------
def test_cancelling_a_delivered_order_is_refused_with_an_observation():
    env = _authed(_view())
    env.step("I will cancel order #R1001. Do you confirm (yes/no)?")  # the user says yes
    obs, reward, terminated, truncated, info = env.step(
        tool_call("cancel_pending_order", order_id="#R1001", reason="no longer needed")
    )
    assert obs.startswith("Policy violation (cancel_not_pending): order #R1001 is delivered; only pending orders")
    assert "returned or exchanged instead" in obs and obs.endswith("The action was not taken.")
    assert info["policy_violation"] == "cancel_not_pending" and not (terminated or truncated)
    assert reward == 0.0


def test_violations_end_the_hard_episode_with_reward_zero():
    env = _authed(_view(on_violation="terminate"))
    env.step("I will cancel order #R1001. Do you confirm (yes/no)?")
    obs, reward, terminated, truncated, info = env.step(
        tool_call("cancel_pending_order", order_id="#R1001", reason="no longer needed")
    )
    assert (reward, terminated, truncated, info["success"]) == (0.0, True, False, False)
    assert info["failed_check"] == "policy" and info["end_reason"] == "violation"
    with pytest.raises(ResetNeeded):
        env.step("hello")


def test_writes_need_confirmation_tools_need_authentication_and_only_own_orders():
    env = _view(violation_penalty=-0.1)
    env.reset(seed=0, options={"task": "CancelHeadphones"})
    obs, reward, *_, info = env.step(tool_call("get_order_details", order_id="#R1002"))
    assert info["policy_violation"] == "not_authenticated" and reward == -0.1, obs
    obs, *_, info = env.step(tool_call("find_user_id_by_email", email="ava.moore@example.com"))
    assert info["policy_violation"] == "unverified_identity" and "never said" in obs, obs  # not given yet
    env.step("Could you tell me the email address of your account?")
    env.step(tool_call("find_user_id_by_email", email="ava.moore@example.com"))
    obs, *_, info = env.step(tool_call("cancel_pending_order", order_id="#R1002", reason="no longer needed"))
    assert info["policy_violation"] == "unconfirmed", obs
    obs, *_, info = env.step(tool_call("get_order_details", order_id="#R1004"))
    assert info["policy_violation"] == "other_user" and "does not belong" in obs
    env.step("Shall I cancel #R1002? Please confirm (yes/no).")
    obs, *_, info = env.step(tool_call("cancel_pending_order", order_id="#R1002", reason="no longer needed"))
    assert info["policy_violation"] is None and '"status": "cancelled"' in obs, obs
    # one confirmation, one write
    obs, *_, info = env.step(tool_call("modify_user_address", user_id="U01", address1="1 A St", city="X", state="OR", zip="1"))
    assert info["policy_violation"] == "unconfirmed"


# --- bad input ---------------------------------------------------------------------------
BAD_CALLS = [
    ("<tool_call>{not json</tool_call>", "could not read the tool call: invalid JSON"),
    ("<tool_call></tool_call>", "the <tool_call> block is empty"),
    ("<tool_call>" + "[" * 100_000, "nests more than 64 levels"),
    (tool_call("launch_rockets"), "unknown tool 'launch_rockets'"),
    (tool_call("get_order_details"), "missing argument(s) order_id"),
    (tool_call("get_order_details", order_id=5), "order_id must be a string"),
    (tool_call("get_order_details", order_id="#R1001", extra=1), "unknown argument(s) extra"),
    (tool_call("get_order_details", order_id="x" * (MAX_STRING_CHARS + 1)), f"at most {MAX_STRING_CHARS}"),
    (tool_call("get_order_details", order_id="R9"), "no order has the id 'R9' (order ids look like '#R1001')"),
    (tool_call("return_delivered_order_items", order_id="#R1001", item_ids=["9"] * 11, payment_method_id="PM01"), "1 to 10 entries"),
]


@pytest.mark.parametrize("action,message", BAD_CALLS)
def test_bad_tool_calls_are_error_observations(action, message):
    env = _authed(_view())
    obs, reward, terminated, truncated, info = env.step(action)
    assert message in obs, obs
    assert info["use_tool"] and (info["tool_error"] or info["policy_violation"]), info
    assert (reward, terminated, truncated) == (0.0, False, False)


@pytest.mark.parametrize("action,why", [
    (None, "the action is not text"),
    ("   \n", "the message is empty"),
    ("x" * (MAX_MESSAGE_CHARS + 1), f"the message has {MAX_MESSAGE_CHARS + 1} characters (at most {MAX_MESSAGE_CHARS})"),
])
def test_bad_messages_are_format_errors_not_sent_to_the_user(action, why):
    env = _view(format_penalty=-0.5)
    env.reset(seed=0, options={"task": "OrderTotal"})
    obs, reward, *_, info = env.step(action)
    assert obs.startswith(f"Format error: {why}; nothing was sent to the user"), obs
    assert info["format_error"] and info["invalid_action"] and reward == -0.5


def test_the_turn_limit_truncates_a_conversation_that_never_ends():
    env = _view(max_turns=5)
    env.reset(seed=0, options={"task": "OrderTotal"})
    for i in range(5):
        obs, reward, terminated, truncated, info = env.step(tool_call("list_all_product_types"))
        if i < 4:
            assert not (terminated or truncated)
    assert (reward, terminated, truncated, info["success"]) == (0.0, False, True, False)
    assert info["failed_check"] == "turn_limit" and obs.endswith("the conversation is over.")


def test_a_stop_token_in_the_users_first_message_does_not_end_the_conversation():
    env = as_single_agent(RetailEnv(), "assistant", {"user": lambda obs, info: f"Hi {STOP_TOKEN}"})
    obs, info = env.reset(seed=0)
    assert obs.endswith("User: Hi") and not info["success"]
    obs, reward, terminated, truncated, info = env.step("How can I help?")
    assert terminated and info["end_reason"] == "user_stop"


# --- linear-time readers of model text (10^5-character adversarial inputs) -----------
ADVERSARIAL = [
    "<tool_call>" * 20_000,
    "<tool_call>" + '"' * 100_000,
    "<tool_call>{" + '"a":' * 25_000,
    "<tool_call><tool_name>" + "<" * 100_000,
    "\\" * 100_000,
    "yes " * 25_000,
    "$3.00" * 20_000,
    "3" * 100_000,
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=lambda t: repr(t[:16]))
def test_parsers_of_model_text_are_linear(text):
    user = ScriptedUser()
    info = {"user_script": TASKS["CancelThenReturn"].script, "user_turn": 1}
    user.act("", info)
    for fn in (
        lambda: parse_tool_call(text),
        lambda: output_said("3.00", text),
        lambda: is_affirmative(text),
        lambda: user.act(text, info),
    ):
        start = time.perf_counter()
        fn()
        # Quiet: up to 40 ms (parse_tool_call on 20 000 openers); a quadratic parse of these
        # 10^5-character texts takes minutes.
        assert time.perf_counter() - start < 0.5, (fn, text[:20])


def test_a_huge_action_steps_in_bounded_time():
    env = _authed(_view())
    for text in ADVERSARIAL:
        start = time.perf_counter()
        env.step(text)
        assert time.perf_counter() - start < 0.5  # includes a 100 kB observation copy


@pytest.mark.parametrize("text,expected", [
    ("It is $3.00.", True), ("It is 13.00", False), ("3.005", False), ("3.00, then", True), ("3,00", False),
])
def test_output_said_matches_whole_numbers_only(text, expected):
    assert output_said("3.00", text) is expected


def test_orders_have_unique_ids():
    assert len({o[0] for o in ORDERS}) == len(ORDERS)


_SURROGATE_CALLS = [
    tool_call("find_user_id_by_email", email="ava\ud800@example.com"),
    '<tool_call>{"name": "find_user_id_by_email", "arguments": {"email": "a\\ud800b"}}</tool_call>',
    '<tool_call>{"name": "find_user_id_by_name_zip", "arguments": '
    '{"first_name": "\\udcff", "last_name": "x", "zip": "1"}}</tool_call>',
    '<tool_call>{"name": "get_product_details", "arguments": {"product_id": "\\udcff"}}</tool_call>',
]


@pytest.mark.parametrize("action", _SURROGATE_CALLS)
def test_a_lone_surrogate_in_a_tool_argument_is_a_tool_error(action):
    """Regression (hostile output, part 2): these raised UnicodeEncodeError out of step()."""
    env = gem_core.make("tau:Retail-v0")
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    assert obs.startswith("Tool error (") and "not valid text" in obs, obs
    assert reward == 0.0 and not terminated and not truncated
    obs, *_ = env.step("Could you tell me the email address of your account?")
    assert obs.startswith("User: ")  # the episode goes on


_READ_TASKS = [n for n, t in TASKS.items() if t.outputs and not t.actions]


def _amounts(skip: str) -> str:
    return " ".join(f"{c:.2f}" for c in range(400) if f"{c:.2f}" != skip)


@pytest.mark.parametrize("name", _READ_TASKS)
@pytest.mark.parametrize("trick", ["everything", "everything but the near miss"])
def test_output_spraying_does_not_satisfy_required_outputs(name, trick):
    """Regression (hostile output, part 2): one message listing every amount 0.00 ... 399.00
    and every status, with no look-up, scored 1.0 on the read tasks."""
    task = TASKS[name]
    skip = task.near_miss_outputs[0] if trick != "everything" else ""
    statuses = " ".join(s for s in ("pending", "processed", "delivered", "cancelled") if s != skip)
    env = gem_core.make("tau:Retail-v0", tasks=[name])
    env.reset(seed=0)
    for action in [f"Here you go: {_amounts(skip)} {statuses}", "Goodbye."] * 5:
        _, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    assert terminated and reward == 0.0 and info["failed_check"] == "outputs", info
    assert "beside" in info["failure"], info["failure"]


def test_an_answer_may_mention_a_few_other_values():
    from gem_core.envs.tau.env import sprayed

    assert sprayed("37.00", "25.00", "The total is $37.00 (an item at 12.00 and one at 13.00).") is None
    assert sprayed("37.00", "25.00", "It is 37.00 or maybe 25.00.") is not None
    assert sprayed("37.00", None, "37.00 " + "1.00 2.00 3.00") is not None
    assert sprayed("cancelled", "pending", "Your order #R1007 is cancelled.") is None
    assert sprayed("U08", None, "user U08 U09 U10 U11") is None  # no counted kind


def test_a_bare_confirmation_request_does_not_confirm_a_write():
    """Regression (hostile output, part 2): a blind-confirm assistant ("Please confirm.",
    then the write) passed 18 of 18 write tasks."""
    env = _authed(_view())
    env.step("Please confirm.")  # the user says yes to nothing in particular
    obs, reward, terminated, _, info = env.step(
        tool_call("cancel_pending_order", order_id="#R1002", reason="no longer needed"))
    assert info["policy_violation"] == "unconfirmed_details" and "'#R1002'" in obs, obs
    env.step("I will cancel order #R1002 (reason: no longer needed). Do you confirm (yes/no)?")
    obs, *_, info = env.step(tool_call("cancel_pending_order", order_id="#R1002", reason="no longer needed"))
    assert info["policy_violation"] is None and '"status": "cancelled"' in obs, obs


def test_another_customers_account_cannot_be_reached_by_guessing_their_email():
    """Regression: the first look-up authenticated whoever it found, so an assistant that
    looked up another customer first could act on their orders."""
    env = _view()
    env.reset(seed=0, options={"task": "CancelHeadphones"})
    other = next(u for u in USERS if u[0] != TASKS["CancelHeadphones"].user_id)
    obs, *_, info = env.step(tool_call("find_user_id_by_email", email=other[3]))
    assert info["policy_violation"] == "unverified_identity", obs
    obs, *_, info = env.step(tool_call("get_user_details", user_id=other[0]))
    assert info["policy_violation"] == "not_authenticated", obs
