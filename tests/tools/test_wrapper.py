"""Tests for gem_core.tools.ToolEnvWrapper with small fake tools and Guess The Number."""

from __future__ import annotations

import random
import re

import pytest

import gem_core
from gem_core.envs.games.guess_the_number import GuessTheNumberEnv
from gem_core.errors import ResetNeeded
from gem_core.tools import Tool, ToolCall, ToolEnvWrapper, ToolResult

pytestmark = pytest.mark.timeout(30)


class TagTool(Tool):
    """``<TAG>x</TAG>`` → observation ``"TAG(x)"``; ``x == "fail"`` gives an error result."""

    def __init__(self, tag: str, *, instruction: str | None = None):
        self.name = tag  # type: ignore[misc]
        self.tag = tag
        self.pattern = re.compile(rf"<{tag}>(.*?)</{tag}>", re.DOTALL)
        self._instruction = (
            f"Call {tag} with <{tag}>...</{tag}>." if instruction is None else instruction
        )
        self.calls: list[str] = []
        self.resets = 0
        self.closed = 0

    def parse(self, action: str) -> ToolCall | None:
        m = self.pattern.search(action)
        if m is None:
            return None
        return ToolCall(self.name, m.group(1), m.span(), m.group(0))

    def execute(self, call: ToolCall) -> ToolResult:
        self.calls.append(call.payload)
        if call.payload == "fail":
            return ToolResult(f"{self.tag} failed", error=True, info={"why": "asked"})
        if call.payload == "raise":
            raise RuntimeError("tool bug")
        return ToolResult(f"{self.tag}({call.payload})")

    def instruction(self) -> str:
        return self._instruction

    def reset(self) -> None:
        self.resets += 1

    def close(self) -> None:
        self.closed += 1


def make_env(**kwargs) -> tuple[ToolEnvWrapper, TagTool, TagTool]:
    a, b = TagTool("a"), TagTool("b")
    game = GuessTheNumberEnv(min_number=1, max_number=10, max_turns=3)
    return ToolEnvWrapper(game, [a, b], **kwargs), a, b


def test_reset_appends_instructions_and_resets_tools():
    env, a, b = make_env()
    obs, info = env.reset(seed=0)
    assert obs.startswith("You are playing Guess The Number")
    assert "Available tools:" in obs and "Call a with <a>" in obs and "Call b with <b>" in obs
    assert info["use_tool"] is False and info["tool_uses"] == 0 and info["tool_name"] is None
    assert (a.resets, b.resets) == (1, 1)


def test_single_tool_instruction_has_no_header_and_empty_ones_are_skipped():
    game = GuessTheNumberEnv(min_number=1, max_number=10)
    env = ToolEnvWrapper(game, [TagTool("a"), TagTool("b", instruction="")])
    obs, _ = env.reset(seed=0)
    assert "Available tools:" not in obs
    assert obs.endswith("Call a with <a>...</a>.")


def test_tool_turns_do_not_consume_task_turns():
    env, a, _ = make_env(max_tool_uses=10)
    env.reset(seed=0)
    game = env.unwrapped
    for i in range(5):  # more tool turns than the task's 3-turn budget
        obs, reward, terminated, truncated, info = env.step(f"let me check <a>{i}</a>")
        assert obs == f"a({i})"
        assert (reward, terminated, truncated) == (0.0, False, False)
        assert info == {
            "use_tool": True,
            "tool_name": "a",
            "tool_error": False,
            "tool_uses": i + 1,
            "tool_info": {},
        }
    assert game.turn == 0, "a tool turn stepped the task env"
    obs, reward, terminated, truncated, info = env.step(f"\\boxed{{{game.target}}}")
    assert terminated and reward == 1.0 and info["success"] is True and info["turn"] == 1
    assert info["use_tool"] is False and info["tool_name"] is None and info["tool_error"] is False


def test_first_parsing_tool_wins_even_when_a_later_tool_also_parses():
    env, a, b = make_env()
    env.reset(seed=0)
    obs, *_, info = env.step("<b>second</b> <a>first</a>")
    assert obs == "a(first)" and info["tool_name"] == "a"
    assert a.calls == ["first"] and b.calls == []
    obs, *_, info = env.step("only <b>x</b>")
    assert obs == "b(x)" and info["tool_name"] == "b"


def test_tool_errors_are_observations_with_their_own_reward():
    env, a, _ = make_env(tool_reward=0.5, tool_error_reward=-0.25)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("<a>fail</a>")
    assert obs == "a failed" and reward == -0.25 and not (terminated or truncated)
    assert (
        info["tool_error"] is True
        and info["use_tool"] is True
        and info["tool_info"] == {"why": "asked"}
    )
    _, reward, *_ = env.step("<a>ok</a>")
    assert reward == 0.5


def test_a_tool_that_raises_becomes_an_error_observation():
    env, a, _ = make_env()
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("<a>raise</a>")
    assert obs == "Tool 'a' failed: RuntimeError: tool bug"
    assert info["tool_error"] is True and not terminated and reward == 0.0


class BrokenParseTool(Tool):
    """A user's tool whose parse raises (the contract says it must not; the wrapper copes)."""

    name = "broken"

    def __init__(self, exc: BaseException):
        self.exc = exc
        self.executed = 0

    def parse(self, action: str) -> ToolCall | None:
        if "call" in action:
            raise self.exc
        return None

    def execute(self, call: ToolCall) -> ToolResult:
        self.executed += 1
        return ToolResult("ran")


@pytest.mark.parametrize(
    ("exc", "text"),
    [
        (ValueError("parser bug"), "ValueError: parser bug"),
        (RecursionError("maximum recursion depth exceeded"), "RecursionError: maximum recursion"),
    ],
)
def test_a_parse_that_raises_is_a_tool_error_turn(exc, text):
    """Regression: ToolEnvWrapper called tool.parse unguarded, so a raising parse crashed step."""
    tool = BrokenParseTool(exc)
    game = GuessTheNumberEnv(min_number=1, max_number=10, max_turns=3)
    env = ToolEnvWrapper(
        game, [tool, TagTool("a")], max_tool_uses=1, max_refusals=1, tool_error_reward=-0.5
    )
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("please call <a>x</a>")
    assert obs == (
        f"Tool 'broken' could not read the action: {type(exc).__name__}: {exc}\n\n"
        + ToolEnvWrapper.LIMIT_MESSAGE.format(limit=1)
    )
    assert text in obs
    assert (reward, terminated, truncated) == (-0.5, False, False)
    assert info["use_tool"] is True and info["tool_error"] is True and info["tool_name"] == "broken"
    assert info["tool_uses"] == 1
    assert info["tool_info"] == {"exception": type(exc).__name__, "stage": "parse"}
    assert tool.executed == 0 and game.turn == 0
    # It counts as a tool use, so the limit still bounds the episode: a refusal, then the task.
    obs, *_, info = env.step("call again")
    assert info["tool_refused"] is True and info["tool_name"] == "broken"
    *_, info = env.step("call once more")
    assert game.turn == 1 and info["use_tool"] is False and info["tool_name"] == "broken"


def test_a_huge_parse_error_message_is_clipped():
    env = ToolEnvWrapper(
        GuessTheNumberEnv(min_number=1, max_number=10), [BrokenParseTool(ValueError("x" * 100_000))]
    )
    env.reset(seed=0)
    obs, *_ = env.step("call")
    assert obs.startswith("Tool 'broken' could not read the action: ValueError: xxx")
    assert len(obs) < 2_000 and "[99000 characters truncated]" in obs


def test_tool_reward_defaults_to_zero():
    env, *_ = make_env()
    env.reset(seed=0)
    assert env.step("<a>x</a>")[1] == 0.0
    assert env.step("<a>fail</a>")[1] == 0.0


def test_max_tool_uses_message_refusal_then_task():
    env, a, _ = make_env(max_tool_uses=2, max_refusals=1)
    env.reset(seed=0)
    game = env.unwrapped
    assert env.step("<a>1</a>")[0] == "a(1)"
    obs, *_ = env.step("<a>2</a>")
    assert obs == "a(2)\n\n" + ToolEnvWrapper.LIMIT_MESSAGE.format(limit=2)
    assert "maximum number of tool uses (2)" in obs and "final answer" in obs
    # Over the limit: one refusal (a no-op turn), the tool does not run.
    obs, reward, terminated, truncated, info = env.step("<a>3</a>")
    assert (
        obs
        == "Tool call not run: the limit of 2 tool uses for this episode is reached. Give your final answer now, without calling tools."
    )
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info == {
        "use_tool": False,
        "tool_name": "a",
        "tool_error": False,
        "tool_refused": True,
        "tool_uses": 2,
    }
    assert a.calls == ["1", "2"] and game.turn == 0
    # Then tool-call turns go to the task (here: a format error that ends the game).
    obs, reward, terminated, truncated, info = env.step("<a>4</a>")
    assert a.calls == ["1", "2"] and game.turn == 1
    assert terminated and info["format_error"] is True and info["use_tool"] is False
    assert info["tool_name"] == "a"


def test_limits_reset_with_the_episode():
    env, a, _ = make_env(max_tool_uses=1, max_refusals=0)
    env.reset(seed=0)
    env.step("<a>1</a>")
    env.reset(seed=1)
    obs, *_, info = env.step("<a>2</a>")
    assert info["use_tool"] is True and info["tool_uses"] == 1 and a.calls == ["1", "2"]


def test_zero_tool_uses_sends_calls_to_the_task_after_refusals():
    env, a, _ = make_env(max_tool_uses=0, max_refusals=0)
    env.reset(seed=0)
    *_, terminated, _, info = env.step("<a>x</a> \\boxed{5}")
    assert a.calls == [] and info["use_tool"] is False and env.unwrapped.turn == 1


def test_non_string_actions_go_to_the_task():
    env, a, _ = make_env()
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step(None)
    assert "the action must be text" in obs and terminated and info["use_tool"] is False
    assert a.calls == []


def test_actions_after_the_end_are_the_task_envs_business():
    env = ToolEnvWrapper(gem_core.make("game:GuessTheNumber-v0-easy"), [TagTool("a")])
    env.reset(seed=0)
    env.step("no box")  # format error ends the game
    with pytest.raises(ResetNeeded):
        env.step("<a>after the end</a>")
    env.close()


def test_episode_always_ends_under_random_actions():
    rng = random.Random(0)
    pieces = [
        "<a>x</a>",
        "<b>y</b>",
        "<a>fail</a>",
        "<a>raise</a>",
        "\\boxed{3}",
        "\\boxed{7}",
        "text",
        "<a>",
    ]
    for episode in range(200):
        max_uses, max_ref = rng.randint(0, 4), rng.randint(0, 2)
        a, b = TagTool("a"), TagTool("b")
        game = GuessTheNumberEnv(min_number=1, max_number=10, max_turns=4, format_error="retry")
        env = ToolEnvWrapper(game, [a, b], max_tool_uses=max_uses, max_refusals=max_ref)
        env.reset(seed=episode)
        steps, tool_turns = 0, 0
        while True:
            action = " ".join(rng.choice(pieces) for _ in range(rng.randint(1, 3)))
            _, reward, terminated, truncated, info = env.step(action)
            steps += 1
            tool_turns += "turn" not in info
            assert isinstance(reward, float)
            assert info["tool_uses"] <= max_uses
            if terminated or truncated:
                break
            assert steps <= game.max_turns + max_uses + max_ref, "the episode did not end"
        assert game.turn <= game.max_turns
        assert tool_turns <= max_uses + max_ref
        assert len(a.calls) + len(b.calls) == info["tool_uses"]


def test_close_closes_tools_and_env_twice_safely():
    closed = []

    class Game(GuessTheNumberEnv):
        def close(self):
            closed.append(1)

    a, b = TagTool("a"), TagTool("b")
    env = ToolEnvWrapper(Game(), [a, b])
    env.close()
    env.close()
    assert (a.closed, b.closed, len(closed)) == (2, 2, 2)
    shared = TagTool("s")
    ToolEnvWrapper(Game(), [shared], close_tools=False).close()
    assert shared.closed == 0


def test_attributes_are_not_forwarded():
    env, *_ = make_env()
    assert env.get_wrapper_attr("max_tool_uses") == 10
    assert env.get_wrapper_attr("target") == env.unwrapped.target
    with pytest.raises(AttributeError, match="wrappers do not forward"):
        env.target  # noqa: B018


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_tool_uses": -1}, "max_tool_uses must be an int >= 0, got -1"),
        ({"max_tool_uses": None}, "max_tool_uses must be an int >= 0, got None"),
        ({"max_refusals": 1.5}, "max_refusals must be an int >= 0, got 1.5"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ToolEnvWrapper(GuessTheNumberEnv(), [TagTool("a")], **kwargs)


def test_tools_must_be_tools():
    with pytest.raises(TypeError, match="expects gem_core.tools.Tool instances, got str"):
        ToolEnvWrapper(GuessTheNumberEnv(), ["python"])  # type: ignore[list-item]


def test_lazy_export():
    import gem_core.tools as tools

    assert tools.ToolEnvWrapper is ToolEnvWrapper
