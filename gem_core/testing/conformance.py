r"""The adapter conformance scenario: fixed episodes, a scripted policy, reference ReBN values.

Every trainer adapter (``integrations/<trainer>``) runs this one scenario through its
trainer's real code path and checks that the per-turn advantages it produces equal the
reference computed here by `gem_core.rl` (to ``1e-6``), so adapters cannot drift from
the core's rollout semantics and estimator.

The scenario: ``game:GuessTheNumber-v0-easy`` (hidden number in 1..10, 4 turns) with
seeds ``(0, 1, 2, 3, 5)`` (targets 4, 5, 7, 10, 2). The scripted policy answers
``\boxed{5}``, ``\boxed{7}``, ``\boxed{2}``, ``\boxed{9}`` at turns 0..3 of every
episode, whatever it reads, as token ids ``tokenizer(text) + [eos]``. That gives
episodes of 1, 2, 3 and 4 turns, successes and turn-limit truncations, and distinct
non-zero per-turn rewards (progress rewards 0.02..0.06 and the win reward 1.0), so a
wrong discount, a wrong turn split or a wrong normalisation shows. Returns use
``gamma = 0.9``; ReBN normalises over all 14 (episode, turn) transitions.

Typical use in an adapter's test::

    from gem_core.testing.conformance import SCENARIO, per_turn_values, assert_matches_reference

    reference = SCENARIO.run_reference(tokenizer)       # gem_core.rl's rollout + ReBN
    policy = SCENARIO.policy(tokenizer)                  # serve this behind the trainer's LLM API
    ...                                                  # run the trainer's rollout + estimator
    values = [per_turn_values(adv[i], mask[i]) for i in range(n)]  # rows in seed order
    assert_matches_reference(values, reference)

The turn of a request is read from its prompt (the number of generation headers of the
chat template in it), so the policy is stateless and can sit behind any server.

`SCENARIOS` holds more scenarios, each a `ConformanceScenario` named by its ``name``:
``"guess"`` (`SCENARIO`), ``"empty_turn"`` (generations with no token, first and in the
middle), ``"format_penalty"`` (a format error: a negative reward ends the episode),
``"truncated"`` (a response cut by the per-turn cap and penalized), ``"terminal_reward"``
(toy:Echo-v0: reward only at the end) and ``"qa"`` (a second env family: single-turn
question answering on the shipped sample). `gem_core.testing.adapter_suite` runs them
all through an adapter. The reference layout is `gem_core.rl.packing.pack_episode` and
the reference per-turn values follow its empty-turn rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gem_core.errors import InvalidArgument
from gem_core.rl.packing import PackedEpisode, pack_episode, turn_spans

__all__ = [
    "ConformanceScenario",
    "ConformanceReference",
    "SCENARIO",
    "SCENARIOS",
    "scenario_script",
    "turn_spans",
    "per_turn_values",
    "packed_episode",
    "assert_matches_reference",
]


@dataclass(frozen=True)
class ConformanceScenario:
    r"""A fixed set of episodes played by a scripted policy.

    Attributes:
        env_id: the env every episode plays.
        seeds: one episode per seed, in this order (adapters keep it: row ``i`` is
            ``seeds[i]``).
        responses: the response text at turn ``t`` of every episode (the last one is
            repeated if an episode runs longer).
        gamma: discount of the per-turn returns.
        eps: the ReBN std offset.
        max_new_tokens: the per-turn token cap (adapters pass it as the trainer's
            per-turn limit); a longer scripted response is cut to it.
        atol: the absolute tolerance adapters must meet.
        name: the scenario's key in `SCENARIOS`.
        env_kwargs: ``gem_core.make`` keyword arguments, as ``(key, value)`` pairs.
        truncated_response: ``"pass"`` or ``"penalize"`` (see `gem_core.rl.run_episode`).
        truncation_reward: the reward of a penalized truncated response.
        responder: the name of a prompt-reading responder (`scenario_script`) used
            instead of ``responses``; ``None``: the scripted texts.

    An empty response text ``""`` is a generation with no token at all.
    """

    env_id: str = "game:GuessTheNumber-v0-easy"
    seeds: tuple[int, ...] = (0, 1, 2, 3, 5)
    responses: tuple[str, ...] = (r"\boxed{5}", r"\boxed{7}", r"\boxed{2}", r"\boxed{9}")
    gamma: float = 0.9
    eps: float = 1e-8
    max_new_tokens: int = 16
    atol: float = 1e-6
    name: str = "guess"
    env_kwargs: tuple[tuple[str, Any], ...] = ()
    truncated_response: str = "pass"
    truncation_reward: float = -1.0
    responder: str | None = None

    @property
    def env_kwargs_dict(self) -> dict[str, Any]:
        """``env_kwargs`` as a dict."""
        return dict(self.env_kwargs)

    def rows(self) -> list[dict[str, Any]]:
        """The dataset rows of the scenario: ``{"env_id", "seed"}`` per episode, in seed order."""
        return [{"env_id": self.env_id, "seed": int(s)} for s in self.seeds]

    def response_text(self, turn: int) -> str:
        """The scripted response text at ``turn`` (0-based)."""
        if turn < 0:
            raise InvalidArgument(f"turn must be >= 0, got {turn}")
        return self.responses[min(turn, len(self.responses) - 1)]

    def response_ids(self, tokenizer: Any, turn: int) -> list[int]:
        """The scripted token ids at ``turn``: the text's ids plus the tokenizer's EOS id."""
        eos = getattr(tokenizer, "eos_token_id", None)
        if eos is None:
            raise InvalidArgument(
                f"{type(tokenizer).__name__} has no eos_token_id; the scripted policy ends each "
                "response with it: use a chat tokenizer (e.g. gem_core.rl.testing.load_tiny_model)"
            )
        return self._text_ids(tokenizer, self.response_text(turn), int(eos))

    @staticmethod
    def _text_ids(tokenizer: Any, text: str, eos: int) -> list[int]:
        if not text:
            return []  # an empty generation: no token, not even the stop token
        return [int(t) for t in tokenizer(text, add_special_tokens=False)["input_ids"]] + [eos]

    def script(self, tokenizer: Any, prompt_ids: Sequence[int]) -> list[int]:
        """The scripted response to ``prompt_ids`` (uncut: the server or policy applies the cap)."""
        turn = self.turn_of_prompt(tokenizer, prompt_ids)
        if self.responder is None:
            return self.response_ids(tokenizer, turn)
        text = tokenizer.decode(list(prompt_ids), skip_special_tokens=False)
        return self._text_ids(tokenizer, _RESPONDERS[self.responder](text, turn), int(tokenizer.eos_token_id))

    def formatter(self, tokenizer: Any) -> Any:
        """The `gem_core.rl.ChatFormatter` the reference uses (no system prompt)."""
        from gem_core.rl.rollout import ChatFormatter

        return ChatFormatter(tokenizer, max_context=4096)

    def sampling(self) -> Any:
        """The reference's `gem_core.rl.SamplingParams` (greedy, ``max_new_tokens``)."""
        from gem_core.rl.rollout import SamplingParams

        return SamplingParams(temperature=0.0, max_new_tokens=self.max_new_tokens)

    def turn_of_prompt(self, tokenizer: Any, prompt_ids: Sequence[int]) -> int:
        """Which turn a prompt asks for: the count of generation headers in it, minus one.

        Raises:
            InvalidArgument: the prompt holds no generation header (it was not rendered
                with ``add_generation_prompt=True`` by this tokenizer's chat template).
        """
        header = _generation_header(tokenizer)
        text = tokenizer.decode(list(prompt_ids), skip_special_tokens=False)
        count = text.count(header)
        if count < 1:
            raise InvalidArgument(
                f"the prompt holds no generation header {header!r}: expected a prompt rendered "
                f"by the tokenizer's chat template with add_generation_prompt=True, got "
                f"{text[-120:]!r} at its end"
            )
        return count - 1

    def policy(self, tokenizer: Any) -> Any:
        """A stateless `gem_core.rl.testing.ScriptedPolicy` answering the scripted turns.

        Each answer is `script`'s, cut to the sampling's ``max_new_tokens`` (a cut answer
        has no stop token: finish reason ``"length"``).
        """
        from gem_core.rl.testing import ScriptedPolicy

        def respond(prompt_ids: list[int], sampling: Any) -> list[int]:
            return self.script(tokenizer, prompt_ids)[: sampling.max_new_tokens]

        return ScriptedPolicy(respond, stop_token_ids=(int(tokenizer.eos_token_id),))

    def run_reference(self, tokenizer: Any) -> ConformanceReference:
        """Play the scenario with `gem_core.rl` (packed layout) and compute the reference ReBN.

        Args:
            tokenizer: a Hugging Face tokenizer with a chat template (the same one the
                adapter's trainer uses, so token ids agree).

        Returns:
            The `ConformanceReference`.
        """
        from gem_core.rl import collect_episodes_sync, per_turn_advantages

        episodes = collect_episodes_sync(
            self.env_id,
            self.policy(tokenizer),
            self.formatter(tokenizer),
            seeds=list(self.seeds),
            sampling=self.sampling(),
            layout="packed",
            concurrency=len(self.seeds),
            env_kwargs=self.env_kwargs_dict,
            truncated_response=self.truncated_response,
            truncation_reward=self.truncation_reward,
        )
        failed = [(ep.seed, ep.error) for ep in episodes if ep.error is not None]
        if failed:
            raise RuntimeError(f"the conformance reference rollout of {self.name!r} failed: {failed}")
        rows = [pack_episode(ep) for ep in episodes]
        rewards = [np.asarray(p.credited_rewards, dtype=np.float64) for p in rows]
        advantages, returns = per_turn_advantages(rewards, "rebn", gamma=self.gamma, eps=self.eps)
        return ConformanceReference(
            scenario=self,
            episodes=list(episodes),
            rewards=rewards,
            returns=returns,
            advantages=advantages,
            rows=rows,
        )


@dataclass
class ConformanceReference:
    """The scenario as played by `gem_core.rl`, with the reference per-turn values.

    The per-turn values are those of the generated turns (the runs of the packed
    response mask), after the empty-turn rule of `gem_core.rl.packing`; in a scenario
    without empty turns they are one per turn of the episode.

    Attributes:
        scenario: the scenario.
        episodes: the `gem_core.rl.Episode` of each seed, in seed order.
        rewards: per-turn (credited) rewards of each episode.
        returns: per-turn discounted returns ``G_t`` of each episode.
        advantages: per-turn reference ReBN advantages of each episode.
        rows: each episode packed (`gem_core.rl.packing.pack_episode`).
    """

    scenario: ConformanceScenario
    episodes: list[Any]
    rewards: list[np.ndarray]
    returns: list[np.ndarray]
    advantages: list[np.ndarray]
    rows: list[PackedEpisode] = field(default_factory=list, repr=False)

    @property
    def num_transitions(self) -> int:
        """The number of (episode, turn) pairs."""
        return int(sum(len(r) for r in self.rewards))

    def packed(self, index: int) -> dict[str, list[Any]]:
        """Episode ``index`` in the packed layout, see `packed_episode`."""
        return _as_dict(self.rows[index])


def _generation_header(tokenizer: Any) -> str:
    """The text the chat template appends for ``add_generation_prompt=True``."""
    msgs = [{"role": "user", "content": "x"}]
    without = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=False)
    with_header = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    if not with_header.startswith(without) or len(with_header) == len(without):
        raise InvalidArgument(
            "the tokenizer's chat template adds no generation header (or rewrites the chat "
            "when adding one); the scripted policy needs one to count turns"
        )
    return with_header[len(without) :]


def packed_episode(episode: Any) -> dict[str, list[Any]]:
    """A single-sample episode as one prompt plus one response with masks and token rewards.

    `gem_core.rl.packing.pack_episode`'s row as a dict: the response holds every
    generated token (mask 1) and, between turns, the env's observation tokens (mask 0);
    each turn's reward sits on its last generated token (a turn that generated nothing:
    see the empty-turn rule of `gem_core.rl.packing`). This is the layout trainers with a
    prompt/response split (verl, OpenRLHF) store.

    Returns:
        ``{"prompt_ids", "response_ids", "response_mask", "token_rewards"}``.

    Raises:
        InvalidArgument: the episode has several samples (per-turn layout, or a chat
            template that rewrote history) or no turn.
    """
    return _as_dict(pack_episode(episode))


def _as_dict(p: PackedEpisode) -> dict[str, list[Any]]:
    return {
        "prompt_ids": list(p.prompt_ids),
        "response_ids": list(p.response_ids),
        "response_mask": list(p.response_mask),
        "token_rewards": list(p.token_rewards),
    }


def per_turn_values(
    values: Sequence[float] | np.ndarray, mask: Sequence[int] | np.ndarray, *, atol: float = 1e-6
) -> np.ndarray:
    """The value of each turn of a packed row (a trainer's per-token advantages).

    Args:
        values: per-token values of one row (e.g. a row of verl's ``advantages``).
        mask: the row's response mask (1 on generated tokens).
        atol: how far the tokens of one turn may differ from each other.

    Returns:
        One float64 value per turn (the turn's first token's).

    Raises:
        AssertionError: a turn's tokens do not share one value.
    """
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    m = np.asarray(mask).reshape(-1)
    if v.shape != m.shape:
        raise InvalidArgument(f"values and mask differ in shape: {v.shape} vs {m.shape}")
    out = []
    for k, (s, e) in enumerate(turn_spans(m)):
        spread = float(np.max(np.abs(v[s:e] - v[s])))
        assert spread <= atol, (
            f"turn {k} (tokens {s}..{e - 1}) does not carry one value: its tokens differ by "
            f"{spread:.3g} (> {atol}); a per-turn estimator writes the turn's value on all "
            "of its generated tokens"
        )
        out.append(v[s])
    return np.asarray(out, dtype=np.float64)


def assert_matches_reference(
    per_row_values: Sequence[Sequence[float] | np.ndarray],
    reference: ConformanceReference,
    *,
    atol: float | None = None,
    what: str = "advantages",
) -> None:
    """Assert that an adapter's per-turn values equal the reference, row by row.

    Args:
        per_row_values: one sequence of per-turn values per episode, in seed order.
        reference: from `ConformanceScenario.run_reference`.
        atol: tolerance (default the scenario's, 1e-6).
        what: ``"advantages"`` (ReBN), ``"returns"`` (``G_t``) or ``"rewards"``.

    Raises:
        AssertionError: naming the first row and turn that differ, and by how much.
    """
    expected_all = {
        "advantages": reference.advantages,
        "returns": reference.returns,
        "rewards": reference.rewards,
    }
    if what not in expected_all:
        raise InvalidArgument(f"what must be one of {sorted(expected_all)}, got {what!r}")
    expected_rows = expected_all[what]
    tol = reference.scenario.atol if atol is None else float(atol)
    seeds = reference.scenario.seeds
    assert len(per_row_values) == len(expected_rows), (
        f"expected {len(expected_rows)} rows (one per seed {seeds}), got {len(per_row_values)}"
    )
    for i, (got, want) in enumerate(zip(per_row_values, expected_rows, strict=True)):
        g = np.asarray(got, dtype=np.float64).reshape(-1)
        assert g.shape == want.shape, (
            f"row {i} (seed {seeds[i]}): expected {want.size} turns, got {g.size}: the turn "
            "split differs from gem_core.rl's (turns are the maximal runs of generated tokens)"
        )
        diff = np.abs(g - want)
        if diff.size and float(diff.max()) > tol:
            k = int(diff.argmax())
            raise AssertionError(
                f"row {i} (seed {seeds[i]}), turn {k}: {what} {g[k]!r} != reference "
                f"{want[k]!r} (|diff| {diff[k]:.3g} > {tol}); row: {g.tolist()} vs "
                f"{want.tolist()}"
            )


def _echo(prompt: str, turn: int) -> str:
    """toy:Echo-v0: the word asked for at the turn its letters pick (or never), else a miss."""
    word = prompt.rsplit("and nothing else: ", 1)[-1]
    k = 0
    while k < len(word) and "a" <= word[k] <= "z":
        k += 1
    word = word[:k]
    return word if word and (sum(map(ord, word)) + turn) % 5 == 0 else "nope"


_QA_ANSWERS: dict[str, str] = {}


def _qa(prompt: str, turn: int) -> str:
    """qa:NaturalQuestions (shipped sample): right for questions of even length, else wrong."""
    if not _QA_ANSWERS:
        import json
        from importlib import resources

        path = resources.files("gem_core.data") / "samples" / "axon-rl__NaturalQuestions" / "train.jsonl"
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                answer = row["answer"]
                _QA_ANSWERS[row["problem"].strip()] = str(answer[0] if isinstance(answer, list) else answer)
    question = prompt.rsplit("Question: ", 1)[-1].split("<|", 1)[0].split("\n", 1)[0].strip()
    if len(question) % 2 == 0 and question in _QA_ANSWERS:
        return f"<answer>{_QA_ANSWERS[question]}</answer>"
    return "<answer>I do not know</answer>"


_RESPONDERS = {"echo": _echo, "qa": _qa}


def scenario_script(name: str, tokenizer: Any, prompt_ids: Sequence[int]) -> list[int]:
    """`ConformanceScenario.script` of ``SCENARIOS[name]``: picklable by reference with
    ``functools.partial(scenario_script, name)``, for servers in other processes."""
    return SCENARIOS[name].script(tokenizer, prompt_ids)


#: The scenario every adapter runs.
SCENARIO = ConformanceScenario()

#: Every scenario of the adapter suite, by name (see the module docs).
SCENARIOS: dict[str, ConformanceScenario] = {
    s.name: s
    for s in (
        SCENARIO,
        ConformanceScenario(
            name="empty_turn",
            responses=("", r"\boxed{5}", "", r"\boxed{7}"),
            env_kwargs=(("format_error", "retry"),),
        ),
        ConformanceScenario(name="format_penalty", responses=(r"\boxed{5}", "maybe seven")),
        ConformanceScenario(
            name="truncated",
            responses=(r"\boxed{5}", "I am not sure, let me think: \\boxed{7}"),
            max_new_tokens=8,
            truncated_response="penalize",
            truncation_reward=-1.0,
        ),
        ConformanceScenario(
            name="terminal_reward", env_id="toy:Echo-v0", seeds=(0, 1, 2, 3, 4, 5), responder="echo"
        ),
        ConformanceScenario(
            name="qa",
            env_id="qa:NaturalQuestions",
            seeds=(0, 1, 2, 3, 4, 5),
            env_kwargs=(("data_path", "sample"),),
            responder="qa",
            max_new_tokens=32,
        ),
    )
}
