# Launch (the embedded default main job; `make demo` runs exactly this):
#
#     ~/.cache/gem/venv-core/bin/python recipes/cpu_reinforce_rebn.py
#
# Variants:  ... --estimator grpo --gamma 1.0 --seed 2      Every argument:  ... --help
"""REINFORCE with Return Batch Normalization (ReBN): a tiny LM learns a game on a laptop CPU.

A Llama-architecture language model with random weights (123k parameters, built offline
by `gem_core.rl.testing`) learns ``game:GuessTheNumber-v0-easy`` from scratch: find a
hidden integer in 1-10 within 4 turns from higher/lower hints, answering ``\\boxed{N}``.

1. **Warm-up, format only.** Supervised steps on episodes played by a *random* policy
   that answers ``\\boxed{N}`` with N uniform in the range: the model learns the answer
   format and nothing about the game (the targets are random numbers, never the
   oracle's).
2. **REINFORCE + ReBN.** Each iteration plays a batch of episodes with the current model
   (`gem_core.rl.collect_episodes_sync`), turns the per-turn rewards into discounted
   returns ``G_t = sum_k gamma^k r_{t+k}`` and normalises them over every turn of the
   batch, ``A = (G - mean G) / (std G + eps)`` (`gem_core.rl.compute_advantages`), and
   takes one Adam step on the mean over generated tokens of ``-A * log pi(token)``
   (`gem_core.rl.build_training_batch`, `gem_core.rl.sequence_logprobs`), plus a small
   KL penalty towards the warm-up model that keeps the policy from collapsing onto one
   answer before it has learned to read the hints. ``--estimator grpo|rloo|reinforce``
   swaps the advantage and changes nothing else; ``--estimator ppo`` adds a critic (a
   copy of the warm-up model's body with a value head) and uses turn-level GAE
   (`gem_core.rl.advantages.gae`) with the clipped objective, ``--ppo-epochs`` steps per
   batch, on the same episodes.
3. **Evaluation.** Greedy decoding on held-out env seeds, next to the env's random policy
   and the binary-search oracle on the same seeds. ``--eval-temperature 1.0`` evaluates
   the sampled policy instead (with a fixed sampling seed): in a long turn budget a greedy
   policy that repeats an invalid guess sees the same view again and repeats it to the end.

What the model reads (``--history summary``, the default): each turn's prompt is the env's
one-line state summary (`Env.state_summary`), ``Range 1-10; target in [6, 8]. Guesses so
far: 5 (higher), 9 (lower). Enter your next guess.``, so every turn is a short training
sample of its own (``layout="per_turn"``). The model still has to learn to read the
interval and to bisect it. ``--history last`` shows the latest observation instead (it
lists the guesses and hints but not the interval: the same game, learned more slowly and
less reliably by this 123k-parameter model); ``--history chat`` prompts with the whole
conversation (one packed sequence per episode; much slower to learn at this size).

Other envs: ``--env-id`` takes any registered text env. The warm-up and the oracle baseline
are GuessTheNumber's (elsewhere ``--warmup-steps 0``; the random baseline is the env's
``sample_random_action`` where it has one). The assistant's view of the multi-agent
``tau:Retail-v0``, its user played by the scripted simulator, trains the same way (a smoke
size; the tiny model learns nothing there, it shows that the single-agent view plugs into
the loop): ``--env-id tau:Retail-v0 --history chat --warmup-steps 0 --max-context 8192
--max-positions 8192 --truncated-response pass`` (``--env-kwargs`` picks its tasks).

Outputs, in ``runs/<run_name>/``: ``metrics.csv`` (one row per iteration; ``nan`` where
a value is undefined, e.g. turns to solve when nothing was solved), ``scalars.jsonl``
(TensorBoard-style scalars, one ``{"tag", "step", "value", "wall_time"}`` object per
line; TensorBoard event files as well when the ``tensorboard`` package is installed),
``learning_curve.png`` and ``summary.json`` (arguments and final evaluation).
"""

from __future__ import annotations

import copy
import csv
import dataclasses
import json
import math
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # runnable from a clone without installing
    sys.path.insert(0, str(REPO))

import gem_core  # noqa: E402  (light: neither imports torch)
import gem_core.rl as rl  # noqa: E402
from gem_core.rl.advantages import gae  # noqa: E402


@dataclass
class Args:
    exp_name: str = "cpu_reinforce_rebn"
    """the name of this experiment (the run name starts with it)"""
    run_name: str | None = None
    """the run's directory name under --output-dir (default: <exp_name>__<estimator>__g<gamma>__<seed>__<unix time>)"""
    output_dir: str = "runs"
    """where run directories are created (relative to the current directory)"""
    seed: int = 1
    """seed of python, numpy and torch, of the model's random weights and of the training env seeds"""
    threads: int = 2
    """torch CPU threads (2 suits a 2-core laptop; use 1 when other jobs share the cores)"""
    track_tensorboard: bool = True
    """also write TensorBoard event files when the `tensorboard` package is installed"""
    progress: bool = True
    """show a progress bar"""
    save_model: bool = False
    """save the trained model and tokenizer to runs/<run_name>/model (a Hugging Face directory)"""

    # Environment
    env_id: str = "game:GuessTheNumber-v0-easy"
    """the env: any registered text env; the warm-up (random answers in its number range) and the oracle baseline need a GuessTheNumber id (elsewhere pass --warmup-steps 0: e.g. tau:Retail-v0 with --history chat --max-context 8192 --max-positions 8192)"""
    min_number: int | None = None
    """override the env's smallest number (None: the env id's default)"""
    max_number: int | None = None
    """override the env's largest number (None: the env id's default)"""
    max_turns: int | None = None
    """override the env's turn budget (None: the env id's default)"""
    env_kwargs: str | None = None
    """more keyword arguments of the env, a JSON object (e.g. '{"tasks": ["CancelHeadphones"]}' for tau:Retail-v0), for training and evaluation"""
    format_error: Literal["terminate", "retry"] | None = None
    """what a malformed answer does during training: 'terminate' the episode or 'retry' (None: the env's default, GuessTheNumber's 'terminate'; evaluation always uses the env's default)"""

    # Model and prompts
    hidden: int = 64
    """hidden size of the tiny model"""
    layers: int = 2
    """decoder layers of the tiny model"""
    heads: int = 4
    """attention heads of the tiny model"""
    max_positions: int = 4096
    """the tiny model's maximum sequence length (tau:Retail-v0's first observation, policy and tool schemas, is ~6,400 tokens of the tiny tokenizer)"""
    max_context: int = 1024
    """the longest sequence of one turn, prompt plus --max-new-tokens; a turn that would exceed it is not played and ends its episode; at most --max-positions"""
    init_std: float = 0.1
    """standard deviation of the random initial weights (0.1 rather than the usual 0.02: the initial model's outputs then depend on the prompt, and reading the hints is learned far sooner)"""
    history: Literal["last", "summary", "chat"] = "summary"
    """what the model reads each turn: 'last' = the latest observation only (it lists every guess and hint; per-turn samples), 'summary' = the env's one-line state summary instead (the hints already turned into the interval still possible; per-turn samples) or 'chat' = the whole conversation (one packed sequence per episode)"""
    system_prompt: str | None = None
    """a system message before each prompt (None: none; short prompts train faster)"""
    max_new_tokens: int = 8
    """the most tokens of one answer (\\boxed{10} plus the end token is 6)"""
    truncated_response: Literal["penalize", "pass"] = "penalize"
    """an answer cut off at --max-new-tokens: 'penalize' (reward --truncation-penalty, the episode ends) or 'pass' (the env reads it as it is)"""
    truncation_penalty: float = -0.1
    """reward of an answer cut off at --max-new-tokens without an end token, which also ends the episode (like a format error); unpenalized, answers drift into '\\boxed{7}}}}' because the env still reads them"""

    # Warm-up (format only)
    warmup_steps: int = 100
    """supervised steps on random well-formed answers before RL (0: none)"""
    warmup_episodes: int = 256
    """random-policy episodes played for the warm-up data"""
    warmup_batch_size: int = 32
    """training samples per warm-up step (turns with --history last, episodes with chat)"""
    warmup_lr: float = 3e-3
    """Adam learning rate of the warm-up"""

    # REINFORCE
    iterations: int = 300
    """RL iterations (one batch of episodes and one gradient step each)"""
    episodes_per_iter: int = 128
    """episodes played per iteration"""
    group_size: int = 8
    """episodes per env seed within an iteration (the groups of grpo/rloo; the same for every estimator, for a fair comparison)"""
    estimator: Literal["rebn", "grpo", "rloo", "reinforce", "ppo"] = "rebn"
    """advantage estimator: rebn | grpo | rloo | reinforce (plain REINFORCE: A = G, no baseline) | ppo (a learned critic, turn-level GAE, the clipped objective for --ppo-epochs steps per batch)"""
    gamma: float = 0.9
    """discount of the per-turn returns G_t = sum_k gamma^k r_{t+k}"""
    learning_rate: float = 3e-3
    """Adam learning rate of the policy-gradient steps"""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the iterations"""
    max_grad_norm: float = 1.0
    """gradient clipping norm"""
    gae_lambda: float = 0.95
    """ppo: the GAE lambda over turns (1: A = G - V)"""
    ppo_epochs: int = 2
    """ppo: gradient steps on each batch (the first is on-policy; clipping acts from the second)"""
    clip_eps: float = 0.2
    """ppo: the clip range of the probability ratio"""
    critic_lr: float = 3e-3
    """ppo: Adam learning rate of the critic (a copy of the warm-up model's body with a zero-initialised value head; annealed like the policy's)"""
    kl_coef: float = 0.05
    """weight of the KL(policy || warm-up model) penalty, estimated on the generated tokens ("k3"); it keeps sampling diverse until the hints are read (0: off, and no reference model is kept)"""
    grad_chunks: int = 2
    """rows of a batch are sorted by length and processed in this many chunks whose gradients add up (less padding and memory; the same update)"""

    # Evaluation
    eval_episodes: int = 200
    """held-out episodes of the final evaluation (greedy decoding unless --eval-temperature)"""
    eval_temperature: float = 0.0
    """sampling temperature of the held-out evaluations (0: greedy decoding; 1.0: the stochastic policy that was trained, with a fixed sampling seed). A greedy policy can repeat one invalid guess to the end of a long turn budget, since an invalid move leaves the view unchanged"""
    eval_seed_start: int = 10_000
    """first env seed of the evaluation (training seeds are drawn below it)"""
    eval_every: int = 0
    """also evaluate every N iterations (0: only at the end)"""


class StateSummaryObservation(gem_core.ObservationWrapper):
    """Replaces each observation with the env's one-line state summary (`Env.state_summary`).

    For GuessTheNumber that is ``Range 1-10; target in [6, 8]. Guesses so far: 5 (higher),
    9 (lower). Enter your next guess.``: the hints already turned into the interval that
    is still possible. Used by ``--history summary``.
    """

    def observation(self, observation: Any) -> Any:
        summary = self.env.unwrapped.state_summary()
        return observation if summary is None else summary


class LatestObservationFormatter(rl.ChatFormatter):
    """A chat formatter whose prompt holds only the latest observation.

    The rollout engine asks for the messages of the whole conversation; this formatter
    answers with the newest ``user`` message alone (after the optional system message)
    whenever a response is due. Use it with ``layout="per_turn"``.
    """

    def messages(self, observations: Any, responses: Any) -> list[dict[str, str]]:
        if len(responses) == len(observations) - 1:
            return super().messages(observations[-1:], [])
        return super().messages(observations, responses)


def args_problem(args: Args) -> str | None:
    """What is wrong with a combination of arguments (tyro checks each one's type), or None."""
    if not 0.0 <= args.gamma <= 1.0:
        return f"--gamma must be in [0, 1], got {args.gamma}"
    if not 0.0 <= args.gae_lambda <= 1.0:
        return f"--gae-lambda must be in [0, 1], got {args.gae_lambda}"
    if not args.clip_eps > 0.0:
        return f"--clip-eps must be > 0, got {args.clip_eps}"
    if not args.eval_temperature >= 0:
        return f"--eval-temperature must be >= 0, got {args.eval_temperature}"
    for name in (
        "iterations", "episodes_per_iter", "group_size", "eval_episodes", "threads", "grad_chunks",
        "max_positions", "max_context", "max_new_tokens", "ppo_epochs",
    ):  # fmt: skip
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}"
    if args.env_kwargs is not None:
        try:
            extra = json.loads(args.env_kwargs)
        except ValueError as exc:
            return f"--env-kwargs must be a JSON object, got {args.env_kwargs!r} ({exc})"
        if not isinstance(extra, dict):
            return f"--env-kwargs must be a JSON object, got {args.env_kwargs!r}"
    if args.max_context > args.max_positions:
        return (
            f"--max-context ({args.max_context}) exceeds the tiny model's --max-positions ({args.max_positions}); "
            "raise --max-positions"
        )
    if args.episodes_per_iter % args.group_size:
        return f"--episodes-per-iter ({args.episodes_per_iter}) must be a multiple of --group-size ({args.group_size})"
    return None


def parse_args(argv: list[str] | None = None) -> Args:
    """Parse the command line into `Args` with tyro: one ``--kebab-case`` option per field,
    its help the docstring under the field; exit 2 with a message on a bad combination."""
    from gem_core.rl.recipe_cli import parse_recipe_args

    return parse_recipe_args(Args, argv, description=__doc__, problem=args_problem)[0]


class ScalarLogger:
    """Per-iteration metrics: a CSV row, JSONL scalars, and TensorBoard when installed."""

    def __init__(self, run_dir: Path, columns: list[str], tensorboard: bool):
        self.columns = columns
        self.csv_file = open(run_dir / "metrics.csv", "w", newline="")
        self.csv = csv.DictWriter(self.csv_file, fieldnames=columns)
        self.csv.writeheader()
        self.jsonl = open(run_dir / "scalars.jsonl", "w")
        self.tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # optional: scalars.jsonl holds the same data
                pass
            else:
                self.tb = SummaryWriter(str(run_dir))

    def log(self, step: int, row: dict[str, float]) -> None:
        """Write one iteration; keys are the CSV columns (tags like ``charts/success_rate``)."""
        now = time.time()
        self.csv.writerow({c: row.get(c, "") for c in self.columns})
        self.csv_file.flush()
        for tag, value in row.items():
            if tag == "iteration" or not math.isfinite(float(value)):
                continue
            self.jsonl.write(json.dumps({"tag": tag, "step": step, "value": float(value), "wall_time": now}) + "\n")
            if self.tb is not None:
                self.tb.add_scalar(tag, float(value), step)
        self.jsonl.flush()

    def close(self) -> None:
        """Close the files."""
        self.csv_file.close()
        self.jsonl.close()
        if self.tb is not None:
            self.tb.close()


def progress_bar(total: int, enabled: bool) -> Any:
    """tqdm when installed, else a minimal stand-in that prints every ~10%."""
    try:
        from tqdm import tqdm
    except ImportError:

        class Simple:
            def __init__(self) -> None:
                self.n, self.postfix, self.every = 0, "", max(1, total // 10)

            def set_postfix_str(self, text: str) -> None:
                self.postfix = text

            def update(self, k: int = 1) -> None:
                self.n += k
                if enabled and (self.n % self.every == 0 or self.n == total):
                    print(f"train {self.n}/{total} {self.postfix}", flush=True)

            def close(self) -> None:
                pass

        return Simple()
    return tqdm(total=total, disable=not enabled, dynamic_ncols=True, desc="train")


def decoding(args: Args) -> str:
    """How the held-out evaluations decode, in words."""
    return "greedy decoding" if args.eval_temperature == 0 else f"sampling at temperature {args.eval_temperature:g}"


def episode_metrics(episodes: list[rl.Episode]) -> dict[str, float]:
    """Success rate, turns, return and error rates of a batch of episodes."""
    n = max(len(episodes), 1)
    turns = [t for ep in episodes for t in ep.turns]
    solved = [ep.num_turns for ep in episodes if ep.success]
    return {
        "success_rate": sum(ep.success for ep in episodes) / n,
        "mean_turns": len(turns) / n,
        "turns_to_solve": float(np.mean(solved)) if solved else float("nan"),
        "mean_return": sum(ep.episode_return for ep in episodes) / n,
        "format_error_rate": sum(t.format_error for t in turns) / max(len(turns), 1),
        "truncated_rate": sum(t.response_truncated for t in turns) / max(len(turns), 1),
        "invalid_rate": sum(bool(t.info.get("invalid_action")) and not t.format_error for t in turns)
        / max(len(turns), 1),
        "error_episodes": float(sum(ep.error is not None for ep in episodes)),
    }


def play_baseline(env_id: str, env_kwargs: dict[str, Any], seeds: list[int], kind: str) -> dict[str, float] | None:
    """The env's random policy (``sample_random_action``) or its oracle on ``seeds``; None
    when the env has no such policy (an oracle exists for the games only)."""
    from gem_core.envs.games.oracles import oracle_for

    env = gem_core.make(env_id, **env_kwargs)
    try:
        if kind == "random":
            sample = getattr(env.unwrapped, "sample_random_action", None)
            if sample is None:
                return None
            choose = lambda e: e.unwrapped.sample_random_action()  # noqa: E731
        else:
            choose = oracle_for(env)
    except KeyError:  # no oracle for this env
        env.close()
        return None
    wins, turns, returns, solved_turns = 0, 0, 0.0, []
    for seed in seeds:
        env.reset(seed=seed)
        t, info = 0, {}
        while True:
            _, reward, terminated, truncated, info = env.step(choose(env))
            t, returns = t + 1, returns + float(reward)
            if terminated or truncated:
                break
        wins += bool(info.get("success"))
        solved_turns += [t] if info.get("success") else []
        turns += t
    env.close()
    return {
        "success_rate": wins / len(seeds),
        "mean_turns": turns / len(seeds),
        "turns_to_solve": float(np.mean(solved_turns)) if solved_turns else float("nan"),
        "mean_return": returns / len(seeds),
    }


def plot_learning_curve(path: Path, history: list[dict[str, float]], final: dict[str, Any], args: Args) -> None:
    """Training success and turns per iteration, with the held-out results, as a PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install 'gem-core[rl]'): no learning_curve.png")
        return
    its = [r["iteration"] for r in history]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.plot(its, [r["charts/success_rate"] for r in history], lw=1, label="training batch (sampled)")
    evals = [(r["iteration"], r["eval/success_rate"]) for r in history if "eval/success_rate" in r]
    ax1.plot(*zip(*evals, strict=True), "o-", color="red", label=f"held-out, {decoding(args)}")
    if final["random"] is not None:
        ax1.axhline(final["random"]["success_rate"], color="gray", ls="--", label="random policy")
    if final["oracle"] is not None:
        ax1.axhline(final["oracle"]["success_rate"], color="green", ls=":", label="oracle")
    ax1.set(xlabel="iteration", ylabel="success rate", ylim=(-0.02, 1.02))
    ax1.set_title(f"{args.env_id}: {args.estimator}, γ={args.gamma:g}", fontsize=10)
    ax1.legend(loc="lower right", fontsize=8)
    ax2.plot(its, [r["charts/mean_turns"] for r in history], lw=1, label="mean turns (training)")
    ax2.plot(its, [r["losses/entropy"] for r in history], lw=1, label="entropy / token")
    if final["oracle"] is not None:
        ax2.axhline(final["oracle"]["mean_turns"], color="green", ls=":", label="oracle mean turns")
    ax2.set(xlabel="iteration")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def turn_states(episodes: list[rl.Episode], pad_token_id: int) -> dict[str, np.ndarray]:
    """Where each generated turn's state is in the training batch of ``episodes``: the row
    and the position of the last token before the turn's first generated token (the critic
    reads its value there), with the episode and turn index. Turns that generated no token
    have no state (and no training tokens). The rows are those of
    `rl.build_training_batch` for the same episodes, in the same order."""
    index = rl.build_training_batch(
        episodes, [np.arange(1, ep.num_turns + 1) for ep in episodes], pad_token_id=pad_token_id
    )
    turn_of = np.rint(index.advantages).astype(np.int64)  # k + 1 on turn k's generated tokens
    out: dict[str, list[int]] = {"row": [], "pos": [], "episode": [], "turn": []}
    for r in range(index.num_samples):
        ids = turn_of[r]
        nz = np.flatnonzero(ids)
        for start in nz[np.r_[True, ids[nz[1:]] != ids[nz[:-1]]]] if nz.size else ():
            out["row"].append(r)
            out["pos"].append(int(start) - 1)
            out["episode"].append(int(index.episode_index[r]))
            out["turn"].append(int(ids[start]) - 1)
    return {k: np.asarray(v, dtype=np.int64) for k, v in out.items()}


def ppo_advantages(
    episodes: list[rl.Episode], values: np.ndarray, states: dict[str, np.ndarray], gamma: float, lam: float
) -> tuple[list[np.ndarray], np.ndarray]:
    """Turn-level GAE from the critic's ``values`` (one per state of `turn_states`):
    per-episode advantages normalised over every state of the batch, and each state's return
    (the critic's target). The turn budget is part of the task, so the state after an
    episode's last turn has value 0 (``terminated``); a turn without a state gets value 0."""
    per_episode = [np.zeros(ep.num_turns) for ep in episodes]
    for v, e, t in zip(values, states["episode"], states["turn"], strict=True):
        per_episode[e][t] = v
    advantages, returns = [], []
    for ep, v in zip(episodes, per_episode, strict=True):
        adv, ret = gae([t.reward for t in ep.turns], v, gamma, lam, terminated=True)
        advantages.append(adv)
        returns.append(ret)
    state_adv = np.array([advantages[e][t] for e, t in zip(states["episode"], states["turn"], strict=True)])
    mean, std = (state_adv.mean(), state_adv.std()) if state_adv.size else (0.0, 1.0)
    state_ret = np.array([returns[e][t] for e, t in zip(states["episode"], states["turn"], strict=True)])
    return [(a - mean) / (std + 1e-8) for a in advantages], state_ret


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the recipe; returns the summary that is also written to ``summary.json``."""
    args = parse_args(argv)

    # ---- Prologue: run name, seeding, output directory, logging ---------------------------
    run_name = args.run_name or f"{args.exp_name}__{args.estimator}__g{args.gamma:g}__{args.seed}__{int(time.time())}"
    run_dir = Path(args.output_dir) / run_name
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "args.json").write_text(json.dumps(dataclasses.asdict(args), indent=2))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch  # heavy imports after parsing, so that --help is instant

    from gem_core.rl.testing import TextPolicy, load_tiny_model

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    print(f"run {run_name}: writing to {run_dir}/", flush=True)
    t_start = time.perf_counter()

    # ---- Env, tiny model, formatter, policy ----------------------------------------------
    env_kwargs = {
        **(json.loads(args.env_kwargs) if args.env_kwargs else {}),
        **{k: v for k, v in (("min_number", args.min_number), ("max_number", args.max_number),
                             ("max_turns", args.max_turns)) if v is not None},
    }  # fmt: skip
    train_env_kwargs = {**env_kwargs, **({} if args.format_error is None else {"format_error": args.format_error})}
    probe = gem_core.make(args.env_id, **env_kwargs)
    probe.reset(seed=0)
    lo, hi = getattr(probe.unwrapped, "min_number", None), getattr(probe.unwrapped, "max_number", None)
    turn_budget = getattr(probe.unwrapped, "max_turns", None)
    probe.close()
    if args.warmup_steps > 0 and not (isinstance(lo, int) and isinstance(hi, int)):
        raise SystemExit(
            f"--env-id {args.env_id}: the warm-up answers random numbers in a GuessTheNumber env's range and "
            "this env has none; pass --warmup-steps 0"
        )
    model, tokenizer = load_tiny_model(
        hidden=args.hidden, layers=args.layers, heads=args.heads, init_std=args.init_std, seed=args.seed,
        max_positions=args.max_positions,
    )  # fmt: skip
    tokenizer.model_max_length = args.max_positions
    print(f"tiny model: {sum(p.numel() for p in model.parameters()) / 1e3:.0f}k parameters", flush=True)
    if args.history in ("last", "summary"):
        formatter_cls, layout = LatestObservationFormatter, "per_turn"
    else:
        formatter_cls, layout = rl.ChatFormatter, "packed"
    formatter = formatter_cls(tokenizer, system_prompt=args.system_prompt, max_context=args.max_context)
    policy = rl.TransformersPolicy(model, tokenizer, max_batch_size=args.episodes_per_iter)

    def collect(seeds: list[int], sampling: rl.SamplingParams, kwargs: dict[str, Any], who: Any = policy) -> list[rl.Episode]:
        source: Any = args.env_id
        if args.history == "summary":
            make_kwargs = kwargs
            source, kwargs = (lambda: StateSummaryObservation(gem_core.make(args.env_id, **make_kwargs))), None
        return rl.collect_episodes_sync(
            source, who, formatter, seeds=seeds, sampling=sampling, layout=layout,
            concurrency=len(seeds), env_kwargs=kwargs,
            truncated_response=args.truncated_response, truncation_reward=args.truncation_penalty,
        )  # fmt: skip

    eval_seeds = list(range(args.eval_seed_start, args.eval_seed_start + args.eval_episodes))
    eval_episodes: list[rl.Episode] = []

    def evaluate() -> dict[str, float]:
        """Play on the held-out seeds (greedy, or at --eval-temperature with a fixed seed), with
        the env's default settings."""
        decode = rl.SamplingParams(
            temperature=args.eval_temperature, max_new_tokens=args.max_new_tokens, seed=args.seed * 1_000_003 - 1
        )
        eval_episodes[:] = collect(eval_seeds, decode, env_kwargs)
        return episode_metrics(eval_episodes)

    results: dict[str, Any] = {
        "random": play_baseline(args.env_id, env_kwargs, eval_seeds, "random"),
        "oracle": play_baseline(args.env_id, env_kwargs, eval_seeds, "oracle"),
        "untrained": evaluate(),
    }
    print(
        "held-out success: " + ", ".join(
            f"{label} {results[key]['success_rate']:.2f}"
            for key, label in (("untrained", "untrained model"), ("random", "random policy"), ("oracle", "oracle"))
            if results[key] is not None
        ),
        flush=True,
    )  # fmt: skip

    # ---- Warm-up: supervised steps on random well-formed answers (format only) -----------
    if args.warmup_steps > 0:
        rng = random.Random(args.seed)
        random_answers = TextPolicy(tokenizer, lambda _prompt: f"\\boxed{{{rng.randint(lo, hi)}}}")
        warm_episodes = collect(
            [rng.randrange(args.eval_seed_start) for _ in range(args.warmup_episodes)],
            rl.SamplingParams(max_new_tokens=args.max_new_tokens),
            train_env_kwargs,
            who=random_answers,
        )
        ones = [np.ones(ep.num_turns) for ep in warm_episodes]
        warm = rl.build_training_batch(warm_episodes, ones, pad_token_id=policy.pad_token_id)
        warm_optimizer = torch.optim.Adam(model.parameters(), lr=args.warmup_lr)
        model.train()
        for _ in range(args.warmup_steps):
            rows = np.random.choice(warm.num_samples, min(args.warmup_batch_size, warm.num_samples), replace=False)
            mb = warm.select(rows).to_torch()
            logp = rl.sequence_logprobs(model, mb["input_ids"], mb["attention_mask"])
            nll = -(logp * mb["loss_mask"]).sum() / mb["loss_mask"].sum()  # answer tokens only
            warm_optimizer.zero_grad()
            nll.backward()
            warm_optimizer.step()
        model.eval()
        results["warmed_up"] = evaluate()
        print(
            f"warm-up: {args.warmup_steps} steps, answer NLL/token {nll.item():.3f}; held-out success "
            f"{results['warmed_up']['success_rate']:.2f}, format errors/turn "
            f"{results['warmed_up']['format_error_rate']:.2f}",
            flush=True,
        )

    # ---- REINFORCE with the chosen advantage estimator -----------------------------------
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    reference = copy.deepcopy(model).requires_grad_(False) if args.kl_coef > 0 else None  # the warm-up model
    critic = critic_optimizer = None
    if args.estimator == "ppo":

        class Critic(torch.nn.Module):
            """The warm-up model's body (a copy) and a zero-initialised scalar head."""

            def __init__(self) -> None:
                super().__init__()
                self.body = copy.deepcopy(model.base_model)
                self.head = torch.nn.Linear(model.config.hidden_size, 1)
                torch.nn.init.zeros_(self.head.weight)
                torch.nn.init.zeros_(self.head.bias)

            def forward(self, input_ids: Any, attention_mask: Any) -> Any:
                hidden = self.body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
                return self.head(hidden).squeeze(-1)

        critic = Critic()
        critic_optimizer = torch.optim.Adam(critic.parameters(), lr=args.critic_lr)
    columns = [
        "iteration", "episodes", "time_s",
        "charts/success_rate", "charts/mean_turns", "charts/turns_to_solve", "charts/mean_return",
        "charts/format_error_rate", "charts/truncated_rate", "charts/invalid_rate", "charts/error_episodes",
        "charts/learning_rate", "losses/loss", "losses/kl_to_warmup", "losses/entropy",
        "losses/logprob_mismatch", "losses/grad_norm", "losses/adv_abs_mean", "losses/value_loss",
        "eval/success_rate", "eval/turns_to_solve",
    ]  # fmt: skip
    logger = ScalarLogger(run_dir, columns, args.track_tensorboard)
    seed_rng = np.random.default_rng(args.seed)
    bar = progress_bar(args.iterations, args.progress)
    history: list[dict[str, float]] = []
    for it in range(1, args.iterations + 1):
        if args.anneal_lr:
            optimizer.param_groups[0]["lr"] = args.learning_rate * (1.0 - (it - 1) / args.iterations)
            if critic_optimizer is not None:
                critic_optimizer.param_groups[0]["lr"] = args.critic_lr * (1.0 - (it - 1) / args.iterations)

        # 1. Rollouts: episodes_per_iter / group_size env seeds, each played group_size times.
        n_seeds = args.episodes_per_iter // args.group_size
        seeds = np.repeat(seed_rng.integers(0, args.eval_seed_start, n_seeds), args.group_size).tolist()
        sampling = rl.SamplingParams(temperature=1.0, max_new_tokens=args.max_new_tokens, seed=args.seed * 1_000_003 + it)
        episodes = collect(seeds, sampling, train_env_kwargs)
        stats = episode_metrics(episodes)
        episodes = [ep for ep in episodes if ep.error is None and ep.num_turns > 0]

        # 2. Advantages: per-turn discounted returns, normalised by the estimator (ReBN:
        #    over all turns of the batch), one value per turn; ppo: turn-level GAE from the
        #    critic's values of the turns' states.
        chunks_of = lambda b: [r for r in np.array_split(np.argsort(b.lengths), min(args.grad_chunks, b.num_samples) or 1) if len(r)]  # noqa: E731
        if critic is None:
            advantages = rl.compute_advantages(episodes, args.estimator, gamma=args.gamma)
        else:
            states = turn_states(episodes, policy.pad_token_id)
            probe_batch = rl.build_training_batch(
                episodes, [np.zeros(ep.num_turns) for ep in episodes], pad_token_id=policy.pad_token_id
            )
            values = np.zeros(len(states["row"]))
            with torch.no_grad():
                for rows in chunks_of(probe_batch):
                    mb = probe_batch.select(rows).to_torch()
                    v = critic(mb["input_ids"], mb["attention_mask"]).numpy()
                    local = {int(r): j for j, r in enumerate(rows)}
                    for k in np.flatnonzero(np.isin(states["row"], rows)):
                        values[k] = v[local[int(states["row"][k])], states["pos"][k]]
            advantages, state_returns = ppo_advantages(episodes, values, states, args.gamma, args.gae_lambda)

        # 3. Policy-gradient steps on loss = mean over generated tokens of -A * log pi(token)
        #    + kl_coef * KL(pi || warm-up model): one step, or --ppo-epochs steps of the
        #    clipped objective for ppo (with a critic step each on (V - return)^2). Rows are
        #    sorted by length and processed in chunks whose gradients add up (less padding);
        #    each update is that of the whole batch.
        batch = rl.build_training_batch(episodes, advantages, pad_token_id=policy.pad_token_id)
        n_tokens = max(batch.num_loss_tokens, 1)
        if batch.num_samples == 0:  # every episode of the batch failed (see charts/error_episodes)
            print(f"iteration {it}: no episode to learn from; the update is skipped", flush=True)
        model.train()
        ref_logps: dict[int, torch.Tensor] = {}  # per chunk: the reference is fixed, so ppo's later epochs reuse it
        for _epoch in range(args.ppo_epochs if critic is not None else 1):
            sums = dict.fromkeys(("loss", "kl", "entropy", "mismatch", "adv_abs", "value_loss"), 0.0)
            optimizer.zero_grad()
            if critic_optimizer is not None:
                critic_optimizer.zero_grad()
            for chunk, rows in enumerate(chunks_of(batch)):
                mb = batch.select(rows).to_torch()
                mask, old_logp, adv = mb["loss_mask"], mb["old_logprobs"], mb["advantages"]
                logp = rl.sequence_logprobs(model, mb["input_ids"], mb["attention_mask"])
                if critic is None:
                    loss = -(logp * adv * mask).sum() / n_tokens
                else:
                    ratio = torch.exp((logp - old_logp) * mask)
                    clipped = torch.clamp(ratio, 1.0 - args.clip_eps, 1.0 + args.clip_eps)
                    loss = -(torch.minimum(ratio * adv, clipped * adv) * mask).sum() / n_tokens
                    mine = np.flatnonzero(np.isin(states["row"], rows))
                    if mine.size:
                        local = {int(r): j for j, r in enumerate(rows)}
                        v = critic(mb["input_ids"], mb["attention_mask"])
                        at = torch.as_tensor([local[int(r)] for r in states["row"][mine]])
                        pred = v[at, torch.as_tensor(states["pos"][mine])]
                        target = torch.as_tensor(state_returns[mine], dtype=pred.dtype)
                        value_loss = 0.5 * ((pred - target) ** 2).sum() / len(states["row"])
                        value_loss.backward()
                        sums["value_loss"] += value_loss.item()
                if reference is not None:
                    ref_logp = ref_logps.get(chunk)
                    if ref_logp is None:
                        with torch.no_grad():
                            ref_logp = ref_logps[chunk] = rl.sequence_logprobs(reference, mb["input_ids"], mb["attention_mask"])
                    log_ratio = (ref_logp - logp) * mask
                    kl = (torch.exp(log_ratio) - log_ratio - 1).sum() / n_tokens  # "k3": >= 0, unbiased
                    loss = loss + args.kl_coef * kl
                    sums["kl"] += kl.item()
                loss.backward()
                sums["loss"] += loss.item()
                sums["entropy"] += (-old_logp * mask).sum().item() / n_tokens  # sampled-token estimate
                sums["mismatch"] += ((logp.detach() - old_logp).abs() * mask).sum().item() / n_tokens
                sums["adv_abs"] += (adv.abs() * mask).sum().item() / n_tokens
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
            optimizer.step()
            if critic is not None and critic_optimizer is not None:
                torch.nn.utils.clip_grad_norm_(critic.parameters(), args.max_grad_norm)
                critic_optimizer.step()
        model.eval()

        # 4. Metrics (the last iteration also runs the final held-out evaluation).
        row: dict[str, float] = {
            "iteration": it,
            "episodes": it * args.episodes_per_iter,
            "time_s": round(time.perf_counter() - t_start, 2),
            **{f"charts/{k}": v for k, v in stats.items()},
            "charts/learning_rate": optimizer.param_groups[0]["lr"],
            "losses/loss": sums["loss"],
            "losses/kl_to_warmup": sums["kl"],
            "losses/entropy": sums["entropy"],
            "losses/logprob_mismatch": sums["mismatch"],
            "losses/grad_norm": float(grad_norm),
            "losses/adv_abs_mean": sums["adv_abs"],
            "losses/value_loss": sums["value_loss"] if critic is not None else float("nan"),
        }
        if it == args.iterations or (args.eval_every and it % args.eval_every == 0):
            ev = evaluate()
            row["eval/success_rate"], row["eval/turns_to_solve"] = ev["success_rate"], ev["turns_to_solve"]
        logger.log(it, row)
        history.append(row)
        bar.set_postfix_str(
            f"success {stats['success_rate']:.2f} turns {stats['mean_turns']:.2f} "
            f"fmt-err {stats['format_error_rate']:.2f} entropy {sums['entropy']:.2f}"
        )
        bar.update(1)
    bar.close()
    logger.close()

    # ---- Report: held-out evaluation, learning curve, summary ----------------------------
    results["trained"] = ev
    wall = time.perf_counter() - t_start
    print(f"\nheld-out evaluation, {len(eval_seeds)} env seeds from {args.eval_seed_start}, {decoding(args)}:")
    print(f"  {'policy':<10} {'success':>8} {'mean turns':>11} {'turns to solve':>15}")
    for name in ("trained", "untrained", "random", "oracle"):
        m = results[name]
        if m is None:  # the env has no such policy
            continue
        print(f"  {name:<10} {m['success_rate']:>8.3f} {m['mean_turns']:>11.2f} {m['turns_to_solve']:>15.2f}")
    print(f"trained policy on the first held-out seeds ({decoding(args)}):")
    for ep in eval_episodes[:6]:
        answers = " → ".join(repr(t.action.replace("\\boxed", "")[:40]) for t in ep.turns)
        print(f"  seed {ep.seed}: {answers}  ({'solved' if ep.success else 'not solved'})")
    print(f"wall time {wall:.0f} s")
    policy.close()
    plot_learning_curve(run_dir / "learning_curve.png", history, results, args)
    if args.save_model:
        model.save_pretrained(run_dir / "model")
        tokenizer.save_pretrained(run_dir / "model")
    summary = {
        "run_name": run_name,
        "args": dataclasses.asdict(args),
        "eval": results,
        "turn_budget": turn_budget,
        "final_train": history[-1],
        "wall_time_s": wall,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    print(f"wrote {run_dir}/: metrics.csv, scalars.jsonl, learning_curve.png, summary.json")
    return summary


if __name__ == "__main__":
    main()
