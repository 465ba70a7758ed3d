# Launch (the embedded default main job; `make demo` runs exactly this):
#
#     ~/.cache/gem/venv-core/bin/python recipes/cpu_reinforce_rebn.py
#
# Other estimators / discounts:  ... --estimator grpo --gamma 1.0 --seed 2
# Every argument, with its meaning:  ... --help
"""REINFORCE with Return Batch Normalization (ReBN) on a laptop CPU.

A tiny Llama-architecture language model with random weights (built offline by
`gem_core.rl.testing`) learns to play ``game:GuessTheNumber-v0-easy`` (find a hidden
integer in 1-10 within 4 turns from higher/lower hints) from scratch:

1. **Warm-up (format only).** A few supervised steps on episodes played by a *random*
   policy that answers ``\\boxed{N}`` with N uniform in the range. This teaches the
   action format and nothing about the game: the targets are random numbers, never the
   oracle's.
2. **REINFORCE + ReBN.** Each iteration plays a batch of episodes with the current model
   (`gem_core.rl.collect_episodes_sync`, packed layout: one token sequence per episode),
   computes per-turn discounted returns ``G_t`` and normalises them over every turn of
   the batch, ``A = (G - mean G) / (std G + eps)`` (`gem_core.rl.compute_advantages`),
   and takes one policy-gradient step on ``-sum(A * log pi(response tokens)) / #tokens``
   (`gem_core.rl.build_training_batch` + `gem_core.rl.sequence_logprobs`).
   ``--estimator grpo|rloo|reinforce`` swaps the advantage, everything else equal.
3. **Evaluation.** Greedy decoding on held-out env seeds, next to a random policy and
   the binary-search oracle on the same seeds.

Outputs, under ``runs/<run_name>/``: ``metrics.csv`` (one row per iteration),
``scalars.jsonl`` (TensorBoard-style scalars: one ``{"tag", "step", "value",
"wall_time"}`` object per line; TensorBoard event files too when the ``tensorboard``
package is installed), ``learning_curve.png`` and ``summary.json`` (the arguments and the
final evaluation).
"""

from __future__ import annotations

import argparse
import ast
import copy
import csv
import dataclasses
import inspect
import json
import math
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from a clone without installing
    sys.path.insert(0, str(REPO))


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
    threads: int = 1
    """torch CPU threads (a model this small runs fastest on one or two)"""
    track_tensorboard: bool = True
    """also write TensorBoard event files when the `tensorboard` package is installed"""
    progress: bool = True
    """show a progress bar"""

    # Environment
    env_id: str = "game:GuessTheNumber-v0-easy"
    """the env to train on (any `game:*` id whose answers are \\boxed{...}; the warm-up assumes GuessTheNumber)"""
    min_number: int | None = None
    """override the env's smallest number (None: the env id's default)"""
    max_number: int | None = None
    """override the env's largest number (None: the env id's default)"""
    max_turns: int | None = None
    """override the env's turn budget (None: the env id's default)"""
    format_error: str = "terminate"
    """what a malformed answer does during training: 'terminate' the episode or 'retry' (evaluation always uses the env's default, 'terminate')"""

    # Model
    hidden: int = 64
    """hidden size of the tiny model"""
    layers: int = 2
    """decoder layers of the tiny model"""
    heads: int = 4
    """attention heads of the tiny model"""
    init_std: float = 0.1
    """standard deviation of the tiny model's random initial weights (0.1, not the usual 0.02: the initial model's outputs then depend on the prompt, which makes reading the hints far quicker to learn)"""
    history: str = "last"
    """what the model reads each turn: 'last' = only the latest observation (the game's observation already lists every guess and hint; short prompts, per-turn samples) or 'chat' = the whole conversation (packed: one token sequence per episode)"""
    system_prompt: str | None = None
    """a system message before the game's rules (None: none; shorter prompts train faster)"""
    max_new_tokens: int = 8
    """the most tokens of one answer (\\boxed{10} plus the end token is 6)"""
    truncation_penalty: float = -0.1
    """reward of an answer cut off at --max-new-tokens without an end token; the episode ends there (like a format error). Unpenalized, such answers drift into '\\boxed{7}}}}...' because the env still parses them"""

    # Warm-up (format only)
    warmup_steps: int = 100
    """supervised steps on random well-formed answers before RL (0: none)"""
    warmup_episodes: int = 256
    """random-policy episodes collected for the warm-up"""
    warmup_batch_size: int = 32
    """episodes per warm-up step"""
    warmup_lr: float = 3e-3
    """Adam learning rate of the warm-up"""

    # REINFORCE
    iterations: int = 250
    """RL iterations (one batch of episodes and one gradient step each)"""
    episodes_per_iter: int = 128
    """episodes played per iteration"""
    group_size: int = 8
    """episodes per env seed within an iteration (the groups of grpo/rloo; the same for every estimator, for a fair comparison)"""
    estimator: str = "rebn"
    """advantage estimator: rebn | grpo | rloo | reinforce (plain: A = G, no baseline)"""
    gamma: float = 0.9
    """discount of the per-turn returns G_t = sum_k gamma^k r_{t+k}"""
    learning_rate: float = 2e-3
    """Adam learning rate of the policy-gradient steps"""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the iterations"""
    max_grad_norm: float = 1.0
    """gradient clipping norm"""
    kl_coef: float = 0.0
    """weight of a KL(policy || warm-up model) penalty (k3 estimator on the generated tokens; 0: off, no reference model is kept)"""
    grad_chunks: int = 2
    """the batch's rows are sorted by length and processed in this many chunks with accumulated gradients (less padding and memory; the same update)"""

    # Evaluation
    eval_episodes: int = 200
    """held-out episodes of the final evaluation (greedy decoding)"""
    eval_seed_start: int = 10_000
    """first env seed of the evaluation (training seeds are drawn below it)"""
    eval_every: int = 0
    """also evaluate greedily every N iterations (0: only at the end)"""
    save_model: bool = False
    """save the trained model and tokenizer to runs/<run_name>/model (a Hugging Face directory)"""


ESTIMATOR_CHOICES = ("rebn", "grpo", "rloo", "reinforce")
HISTORY_CHOICES = ("last", "chat")


def latest_observation_formatter(base: type) -> type:
    """A `ChatFormatter` subclass whose prompt holds only the latest observation.

    The rollout engine asks the formatter for the messages of the whole conversation;
    this one answers with just the newest ``user`` message (after the optional system
    message) whenever a response is due. Use it with ``layout="per_turn"``: each turn is
    then a short, self-contained sample.
    """

    class LatestObservationFormatter(base):  # type: ignore[misc, valid-type]
        def messages(self, observations: Any, responses: Any) -> list[dict[str, str]]:
            if len(responses) == len(observations) - 1:
                return super().messages(observations[-1:], [])
            return super().messages(observations, responses)

    return LatestObservationFormatter


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each dataclass field (the CleanRL/tyro convention), by name."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in zip(body, body[1:], strict=False):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def parse_args(argv: list[str] | None = None) -> Args:
    """Parse the command line into `Args`: one ``--kebab-case`` option per field."""
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    docs = field_docs(Args)
    scalar = {"int": int, "float": float, "str": str}
    for f in dataclasses.fields(Args):
        flag = "--" + f.name.replace("_", "-")
        kind = str(f.type).replace(" ", "")
        help_text = docs.get(f.name, "") or " "
        if kind == "bool":
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=help_text)
            continue
        optional = kind.endswith("|None")
        base = scalar[kind.removesuffix("|None")]

        def convert(text: str, base: Any = base, optional: bool = optional) -> Any:
            if optional and text.lower() == "none":
                return None
            return base(text)

        convert.__name__ = base.__name__  # argparse names the type in its error messages
        parser.add_argument(flag, type=convert, default=f.default, help=help_text, metavar=base.__name__.upper())
    args = Args(**vars(parser.parse_args(argv)))
    if args.estimator not in ESTIMATOR_CHOICES:
        parser.error(f"--estimator must be one of {', '.join(ESTIMATOR_CHOICES)}, got {args.estimator!r}")
    if not 0.0 <= args.gamma <= 1.0:
        parser.error(f"--gamma must be in [0, 1], got {args.gamma}")
    if args.history not in HISTORY_CHOICES:
        parser.error(f"--history must be one of {', '.join(HISTORY_CHOICES)}, got {args.history!r}")
    if args.format_error not in ("terminate", "retry"):
        parser.error(f"--format-error must be 'terminate' or 'retry', got {args.format_error!r}")
    if args.episodes_per_iter % args.group_size:
        parser.error(
            f"--episodes-per-iter ({args.episodes_per_iter}) must be a multiple of "
            f"--group-size ({args.group_size})"
        )
    for name in ("iterations", "episodes_per_iter", "group_size", "eval_episodes", "threads", "grad_chunks"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    return args


class ScalarLogger:
    """Per-iteration metrics: a CSV row per iteration, JSONL scalars, TensorBoard if present."""

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
            except ImportError:  # tensorboard is optional: scalars.jsonl has the same data
                pass
            else:
                self.tb = SummaryWriter(str(run_dir))

    def log(self, step: int, row: dict[str, float]) -> None:
        """Write one iteration; keys are tags like ``charts/success_rate``."""
        now = time.time()
        self.csv.writerow({c: row.get(c, "") for c in self.columns})
        self.csv_file.flush()
        for tag, value in row.items():
            if tag in ("iteration",) or value is None or not math.isfinite(float(value)):
                continue
            self.jsonl.write(json.dumps({"tag": tag, "step": step, "value": float(value), "wall_time": now}) + "\n")
            if self.tb is not None:
                self.tb.add_scalar(tag, float(value), step)
        self.jsonl.flush()

    def close(self) -> None:
        self.csv_file.close()
        self.jsonl.close()
        if self.tb is not None:
            self.tb.close()


def progress_bar(total: int, enabled: bool) -> Any:
    """tqdm when installed (and enabled), else a minimal stand-in printing every ~10%."""
    try:
        from tqdm import tqdm

        return tqdm(total=total, disable=not enabled, dynamic_ncols=True, desc="train")
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


def episode_metrics(episodes: list[Any]) -> dict[str, float]:
    """Success rate, turns, returns and error rates of a batch of episodes."""
    n = max(len(episodes), 1)
    solved = [ep.num_turns for ep in episodes if ep.success]
    turns = sum(ep.num_turns for ep in episodes)
    return {
        "success_rate": sum(ep.success for ep in episodes) / n,
        "mean_turns": turns / n,
        "turns_to_solve": float(np.mean(solved)) if solved else float("nan"),
        "mean_return": sum(ep.episode_return for ep in episodes) / n,
        "format_error_rate": sum(t.format_error for ep in episodes for t in ep.turns) / max(turns, 1),
        "truncated_rate": sum(t.response_truncated for ep in episodes for t in ep.turns) / max(turns, 1),
        "invalid_rate": sum(bool(t.info.get("invalid_action")) and not t.format_error for ep in episodes for t in ep.turns)
        / max(turns, 1),
        "error_episodes": float(sum(ep.error is not None for ep in episodes)),
    }


def play_baseline(env_id: str, env_kwargs: dict[str, Any], seeds: list[int], kind: str) -> dict[str, float]:
    """Success rate and turns of the env's random policy or its oracle on ``seeds``."""
    import gem_core
    from gem_core.envs.games.oracles import oracle_for

    env = gem_core.make(env_id, **env_kwargs)
    choose = (lambda e: e.unwrapped.sample_random_action()) if kind == "random" else oracle_for(env)
    wins, turns, solved_turns, returns = 0, 0, [], 0.0
    for seed in seeds:
        env.reset(seed=seed)
        t, total = 0, 0.0
        while True:
            _, reward, terminated, truncated, info = env.step(choose(env))
            t, total = t + 1, total + float(reward)
            if terminated or truncated:
                break
        wins += bool(info.get("success"))
        if info.get("success"):
            solved_turns.append(t)
        turns, returns = turns + t, returns + total
    env.close()
    n = len(seeds)
    return {
        "success_rate": wins / n,
        "mean_turns": turns / n,
        "turns_to_solve": float(np.mean(solved_turns)) if solved_turns else float("nan"),
        "mean_return": returns / n,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)

    # ---- Prologue: run name, seeding, output directory, logging ----------------------
    run_name = args.run_name or (
        f"{args.exp_name}__{args.estimator}__g{args.gamma:g}__{args.seed}__{int(time.time())}"
    )
    run_dir = Path(args.output_dir) / run_name
    run_dir.mkdir(parents=True, exist_ok=True)
    random.seed(args.seed)
    np.random.seed(args.seed)
    import torch  # heavy imports after argument parsing, so --help is instant

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import gem_core.rl as rl
    from gem_core.rl.testing import TextPolicy, load_tiny_model

    (run_dir / "args.json").write_text(json.dumps(dataclasses.asdict(args), indent=2))
    print(f"run {run_name}: writing to {run_dir}/", flush=True)
    t_start = time.perf_counter()

    # ---- Env, tiny model, formatter, policy -------------------------------------------
    env_kwargs: dict[str, Any] = {}
    if args.min_number is not None:
        env_kwargs["min_number"] = args.min_number
    if args.max_number is not None:
        env_kwargs["max_number"] = args.max_number
    if args.max_turns is not None:
        env_kwargs["max_turns"] = args.max_turns
    train_env_kwargs = {**env_kwargs, "format_error": args.format_error}
    import gem_core

    probe = gem_core.make(args.env_id, **env_kwargs).unwrapped
    lo, hi = int(getattr(probe, "min_number", 1)), int(getattr(probe, "max_number", 10))

    model, tokenizer = load_tiny_model(
        hidden=args.hidden, layers=args.layers, heads=args.heads, init_std=args.init_std, seed=args.seed
    )
    n_params = sum(p.numel() for p in model.parameters())
    print(f"tiny model: {n_params / 1e3:.0f}k parameters, vocabulary {len(tokenizer)}", flush=True)
    if args.history == "last":
        formatter_cls, layout = latest_observation_formatter(rl.ChatFormatter), "per_turn"
    else:
        formatter_cls, layout = rl.ChatFormatter, "packed"
    formatter = formatter_cls(tokenizer, system_prompt=args.system_prompt, max_context=1024)
    policy = rl.TransformersPolicy(model, tokenizer, max_batch_size=args.episodes_per_iter)
    pad_id = policy.pad_token_id

    def collect(seeds: list[int], sampling: Any, kwargs: dict[str, Any], who: Any = policy) -> list[Any]:
        return rl.collect_episodes_sync(
            args.env_id,
            who,
            formatter,
            seeds=seeds,
            sampling=sampling,
            layout=layout,
            concurrency=len(seeds),
            truncated_response="penalize",
            truncation_reward=args.truncation_penalty,
            env_kwargs=kwargs,
        )

    eval_seeds = list(range(args.eval_seed_start, args.eval_seed_start + args.eval_episodes))
    greedy = rl.SamplingParams(temperature=0.0, max_new_tokens=args.max_new_tokens)

    last_eval: list[Any] = []

    def evaluate() -> dict[str, float]:
        last_eval[:] = collect(eval_seeds, greedy, env_kwargs)
        return episode_metrics(last_eval)

    baselines = {
        "random": play_baseline(args.env_id, env_kwargs, eval_seeds, "random"),
        "oracle": play_baseline(args.env_id, env_kwargs, eval_seeds, "oracle"),
    }
    before = evaluate()
    print(
        f"held-out success before training: model {before['success_rate']:.2f}, "
        f"random {baselines['random']['success_rate']:.2f}, oracle {baselines['oracle']['success_rate']:.2f}",
        flush=True,
    )

    # ---- Warm-up: supervised steps on random well-formed answers (format only) --------
    warmup_rng = random.Random(args.seed)
    random_answers = TextPolicy(tokenizer, lambda _prompt: f"\\boxed{{{warmup_rng.randint(lo, hi)}}}")
    warmup_loss = float("nan")
    if args.warmup_steps > 0:
        warm_eps = collect(
            [warmup_rng.randrange(args.eval_seed_start) for _ in range(args.warmup_episodes)],
            rl.SamplingParams(max_new_tokens=args.max_new_tokens),
            train_env_kwargs,
            who=random_answers,
        )
        warm_batch = rl.build_training_batch(
            warm_eps, [np.ones(ep.num_turns) for ep in warm_eps], pad_token_id=pad_id
        )
        opt = torch.optim.Adam(model.parameters(), lr=args.warmup_lr)
        model.train()
        for _ in range(args.warmup_steps):
            rows = np.random.choice(warm_batch.num_samples, size=min(args.warmup_batch_size, warm_batch.num_samples), replace=False)
            t = warm_batch.select(rows).to_torch()
            logp = rl.sequence_logprobs(model, t["input_ids"], t["attention_mask"])
            loss = -(logp * t["loss_mask"]).sum() / t["loss_mask"].sum()  # mean NLL of answer tokens
            opt.zero_grad()
            loss.backward()
            opt.step()
            warmup_loss = loss.item()
        model.eval()
        after_warmup = evaluate()
        print(
            f"warm-up: {args.warmup_steps} steps, final NLL/token {warmup_loss:.3f}; held-out greedy "
            f"success {after_warmup['success_rate']:.2f}, format errors/turn {after_warmup['format_error_rate']:.2f}",
            flush=True,
        )

    # ---- REINFORCE with the chosen advantage estimator --------------------------------
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    reference = None
    if args.kl_coef > 0:  # a frozen copy of the warm-up model
        reference = copy.deepcopy(model).eval().requires_grad_(False)
    columns = [
        "iteration", "episodes", "time_s",
        "charts/success_rate", "charts/mean_turns", "charts/turns_to_solve", "charts/mean_return",
        "charts/format_error_rate", "charts/truncated_rate", "charts/invalid_rate", "charts/error_episodes",
        "losses/loss", "losses/kl_to_warmup", "losses/entropy", "losses/logprob_mismatch", "losses/grad_norm",
        "losses/adv_abs_mean", "charts/learning_rate", "eval/success_rate", "eval/turns_to_solve",
    ]  # fmt: skip
    logger = ScalarLogger(run_dir, columns, args.track_tensorboard)
    seed_rng = np.random.default_rng(args.seed)
    bar = progress_bar(args.iterations, args.progress)
    history: list[dict[str, float]] = []
    for it in range(1, args.iterations + 1):
        if args.anneal_lr:
            optimizer.param_groups[0]["lr"] = args.learning_rate * (1.0 - (it - 1) / args.iterations)
        # 1. Rollouts: episodes_per_iter / group_size env seeds, each played group_size times.
        seeds = np.repeat(
            seed_rng.integers(0, args.eval_seed_start, args.episodes_per_iter // args.group_size),
            args.group_size,
        ).tolist()
        sampling = rl.SamplingParams(
            temperature=1.0, max_new_tokens=args.max_new_tokens, seed=args.seed * 1_000_003 + it
        )
        episodes = collect(seeds, sampling, train_env_kwargs)
        stats = episode_metrics(episodes)
        episodes = [ep for ep in episodes if ep.error is None and ep.num_turns > 0]

        # 2. Advantages: per-turn discounted returns, normalised by the estimator.
        advantages = rl.compute_advantages(episodes, args.estimator, gamma=args.gamma)

        # 3. One policy-gradient step: loss = mean over generated tokens of -A * log pi(token)
        #    (+ kl_coef * KL(pi || warm-up model)). Rows are sorted by length and processed
        #    in chunks whose gradients add up (less padding); the update is that of the batch.
        batch = rl.build_training_batch(episodes, advantages, pad_token_id=pad_id)
        n_tokens = max(batch.num_loss_tokens, 1)
        sums = dict.fromkeys(("loss", "kl", "entropy", "mismatch", "adv_abs"), 0.0)
        model.train()
        optimizer.zero_grad()
        for rows in np.array_split(np.argsort(batch.lengths), min(args.grad_chunks, batch.num_samples)):
            mb = batch.select(rows).to_torch()
            mask, old_logp = mb["loss_mask"], mb["old_logprobs"]
            logp = rl.sequence_logprobs(model, mb["input_ids"], mb["attention_mask"])
            loss = -(logp * mb["advantages"] * mask).sum() / n_tokens
            if reference is not None:
                with torch.no_grad():
                    ref_logp = rl.sequence_logprobs(reference, mb["input_ids"], mb["attention_mask"])
                log_ratio = (ref_logp - logp) * mask
                kl = (torch.exp(log_ratio) - log_ratio - 1).sum() / n_tokens  # "k3" estimator, >= 0
                loss = loss + args.kl_coef * kl
                sums["kl"] += kl.item()
            loss.backward()
            sums["loss"] += loss.item()
            sums["entropy"] += (-old_logp * mask).sum().item() / n_tokens  # sampled-token estimate
            sums["mismatch"] += ((logp.detach() - old_logp).abs() * mask).sum().item() / n_tokens
            sums["adv_abs"] += (mb["advantages"].abs() * mask).sum().item() / n_tokens
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
        optimizer.step()
        model.eval()

        # 4. Metrics.
        row: dict[str, float] = {
            "iteration": it,
            "episodes": it * args.episodes_per_iter,
            "time_s": round(time.perf_counter() - t_start, 2),
            **{f"charts/{k}": v for k, v in stats.items()},
            "losses/loss": sums["loss"],
            "losses/kl_to_warmup": sums["kl"],
            "losses/entropy": sums["entropy"],
            "losses/logprob_mismatch": sums["mismatch"],
            "losses/grad_norm": float(grad_norm),
            "losses/adv_abs_mean": sums["adv_abs"],
            "charts/learning_rate": optimizer.param_groups[0]["lr"],
        }
        if it == args.iterations or (args.eval_every and it % args.eval_every == 0):
            ev = evaluate()  # greedy, held-out seeds; the last one is the final evaluation
            row["eval/success_rate"], row["eval/turns_to_solve"] = ev["success_rate"], ev["turns_to_solve"]
        logger.log(it, row)
        history.append(row)
        bar.set_postfix_str(
            f"success {stats['success_rate']:.2f} turns {stats['mean_turns']:.2f} "
            f"fmt-err {stats['format_error_rate']:.2f} entropy {sums['entropy']:.2f}"
        )
        bar.update(1)
    bar.close()

    # ---- Final evaluation on held-out seeds (greedy) ----------------------------------
    trained = ev  # the greedy held-out evaluation of the last iteration
    logger.close()
    train_time = time.perf_counter() - t_start
    print(f"\nheld-out evaluation on {len(eval_seeds)} seeds ({args.env_id}{env_kwargs or ''}), greedy decoding:")
    print(f"  {'policy':<10} {'success':>8} {'mean turns':>11} {'turns to solve':>15}")
    for name, m in (("trained", trained), ("untrained", before), ("random", baselines["random"]), ("oracle", baselines["oracle"])):
        print(f"  {name:<10} {m['success_rate']:>8.3f} {m['mean_turns']:>11.2f} {m['turns_to_solve']:>15.2f}")
    print("greedy play on the first held-out seeds (answers, then solved or not):")
    for ep in last_eval[:8]:
        answers = " → ".join(t.action.replace("\\boxed", "") for t in ep.turns)
        print(f"  seed {ep.seed}: {answers}  {'solved' if ep.success else 'not solved'}")
    print(f"wall time {train_time:.0f} s")
    if args.save_model:
        model.save_pretrained(run_dir / "model")
        tokenizer.save_pretrained(run_dir / "model")

    # ---- Learning curve ----------------------------------------------------------------
    plot_learning_curve(run_dir / "learning_curve.png", history, trained, baselines, args)
    summary = {
        "run_name": run_name,
        "args": dataclasses.asdict(args),
        "eval": {"trained": trained, "untrained": before, **baselines},
        "final_train": history[-1],
        "wall_time_s": train_time,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=float))
    print(f"wrote {run_dir}/metrics.csv, scalars.jsonl, learning_curve.png, summary.json")
    return summary


def plot_learning_curve(
    path: Path, history: list[dict[str, float]], trained: dict[str, float], baselines: dict[str, dict[str, float]], args: Args
) -> None:
    """Training success rate and mean turns per iteration, with the baselines, as a PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install 'gem-core[rl]'): no learning_curve.png")
        return
    its = [r["iteration"] for r in history]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.plot(its, [r["charts/success_rate"] for r in history], label="training batch (sampled)")
    ax1.axhline(baselines["random"]["success_rate"], color="gray", ls="--", label="random policy")
    ax1.axhline(baselines["oracle"]["success_rate"], color="green", ls=":", label="oracle")
    ax1.scatter([its[-1]], [trained["success_rate"]], color="red", zorder=3, label="trained, greedy (held-out)")
    ax1.set(xlabel="iteration", ylabel="success rate", ylim=(-0.02, 1.02), title=f"{args.env_id}: {args.estimator}, γ={args.gamma:g}")
    ax1.legend(loc="lower right", fontsize=8)
    ax2.plot(its, [r["charts/mean_turns"] for r in history], label="mean turns")
    ax2.plot(its, [r["charts/format_error_rate"] for r in history], label="format errors / turn")
    ax2.axhline(baselines["oracle"]["mean_turns"], color="green", ls=":", label="oracle mean turns")
    ax2.set(xlabel="iteration", title="turns and format errors")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
