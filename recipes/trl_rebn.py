# Launch (laptop CPU, the tiny offline model; TRL's venv: `make venv-trl`):
#
#     ~/.cache/gem/venv-trl/bin/python recipes/trl_rebn.py --model tiny
#
# GPUs, a real model, generation in TRL's vLLM server (start it first: `trl vllm-serve --model M`):
#
#     accelerate launch recipes/trl_rebn.py --model Qwen/Qwen3-0.6B --use_vllm --vllm_mode server \
#         --format_warmup_steps 0 --system_prompt "You are playing a game." --max_tokens_per_turn 256 \
#         --max_completion_length 2048 --per_device_train_batch_size 16 --num_generations 8 --bf16
#
# Any registered text env: `--env_id toy:Echo-v0`; your own: `--env_id mine:Env-v0 --env_module my_envs`;
# a multi-task mixture: `--env_id game:GuessTheNumber-v0-easy toy:Echo-v0=0.5`; check without training: `--dry_run`
# (the format warm-up and the oracle baseline apply to GuessTheNumber only; the random baseline
# to envs with `sample_random_action`).
# Every GRPOConfig / GemGRPOConfig option is a flag (`--help`); the recipe's own are in ScriptArgs.
"""GRPO-style training in TRL with ReBN advantages on a multi-turn GEM game (or any text env).

TRL's ``GRPOTrainer`` with GEM's adapter (`gem_trl`): `gem_trl.GemRollout` plays one
``game:GuessTheNumber-v0-easy`` episode per dataset row (the whole conversation in one
completion, env tokens masked out of the loss) and `gem_trl.GemGRPOTrainer` replaces
TRL's group-normalised scalar advantages by per-turn **ReBN**: discounted per-turn
returns ``G_t = sum_k gamma^k r_{t+k}`` normalised over every turn of the batch. With
``--model tiny`` a 123k-parameter Llama with random weights (built offline by
`gem_core.rl.testing`) learns the game from scratch on a laptop CPU, like
``recipes/cpu_reinforce_rebn.py`` but inside a third-party trainer:

1. **Warm-up, format only** (``--format_warmup_steps``): supervised steps on episodes of a
   *random* policy answering ``\\boxed{N}`` (the model learns the answer format, nothing
   about the game); the warmed-up model is saved and is TRL's reference model for the
   KL term (``--beta``).
2. **GRPO loop of TRL** with ReBN advantages: each step plays
   ``per_device_train_batch_size`` episodes (``num_generations`` per env seed), one
   gradient step; TRL logs ``gem/success_rate``, ``gem/mean_turns`` and its own metrics.
3. **Evaluation**: greedy play on held-out env seeds, next to the env's random policy and
   the binary-search oracle (every ``--eval_every`` steps and at the end).

What the model reads (``--history interval``, the default): each observation is only the
interval still possible, ``target in [6, 8]``, inside the packed conversation (the whole
episode is one completion, so short observations keep the sequences short);
``--history summary`` shows the env's one-line state summary (``Range 1-10; target in
[6, 8]. Guesses so far: ...``), ``--history chat`` the env's own observations.

Outputs in ``<output_dir>/<run_name>/``: ``metrics.jsonl`` (TRL's log history),
``evals.jsonl``, ``learning_curve.png`` and ``summary.json`` (the same layout as the CPU
recipe's).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # runnable from a clone without installing
    sys.path.insert(0, str(REPO))
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import gem_core  # noqa: E402
import gem_core.rl as rl  # noqa: E402


@dataclass
class ScriptArgs:
    model: str = field(default="tiny", metadata={"help": "'tiny' (built offline, random weights) or a model path / hub id"})
    run_name_prefix: str = field(default="trl_rebn", metadata={"help": "the run directory starts with it"})
    env_id: list[str] = field(default_factory=lambda: ["game:GuessTheNumber-v0-easy"], metadata={"help": "the env(s) to train on: any registered text env id (gem list), each optionally ID=WEIGHT; several make a multi-task mixture (training rows by weight); the held-out evaluation, the baselines and the format warm-up (GuessTheNumber only) use the first"})
    env_module: list[str] = field(default_factory=list, metadata={"help": "modules (or .py paths) that register your own envs, imported in every process accelerate starts; not needed for envs installed with a gem_core.envs entry point (docs/plugins.md)"})
    history: str = field(default="interval", metadata={"help": "what each observation is: 'summary' (the env's one-line state summary), 'interval' (only 'target in [lo, hi]') or 'chat' (the env's own)"})
    format_error: str = field(default="terminate", metadata={"help": "what a malformed answer does in training: 'terminate' or 'retry'"})
    train_seeds: int = field(default=10_000, metadata={"help": "env seeds 0..N-1 form the training dataset"})
    threads: int = field(default=2, metadata={"help": "torch CPU threads"})
    hidden: int = field(default=64, metadata={"help": "tiny model: hidden size"})
    layers: int = field(default=2, metadata={"help": "tiny model: decoder layers"})
    heads: int = field(default=4, metadata={"help": "tiny model: attention heads"})
    init_std: float = field(default=0.1, metadata={"help": "tiny model: std of the random weights"})
    format_warmup_steps: int = field(default=100, metadata={"help": "supervised format-only steps before RL (0: none, e.g. for an instruct model)"})
    warmup_episodes: int = field(default=256, metadata={"help": "random-policy episodes of the warm-up data"})
    warmup_batch_size: int = field(default=32, metadata={"help": "episodes per warm-up step"})
    warmup_lr: float = field(default=3e-3, metadata={"help": "Adam learning rate of the warm-up"})
    eval_episodes: int = field(default=200, metadata={"help": "held-out episodes of each evaluation (greedy)"})
    eval_seed_start: int = field(default=10_000, metadata={"help": "first held-out env seed (the CPU recipe's; training seeds lie below it)"})
    eval_every: int = field(default=0, metadata={"help": "also evaluate every N steps (0: only at the end)"})
    stop_at_success: float | None = field(default=None, metadata={"help": "stop once a held-out evaluation reaches this success rate"})
    max_wall_s: float | None = field(default=None, metadata={"help": "stop training after this many seconds (the final evaluation still runs)"})
    dry_run: bool = field(default=False, metadata={"help": "check the envs (each id is made and reset) and the arguments, build the training dataset, print the plan; no model, no training"})


# The recipe's defaults for GemGRPOConfig (every one can be overridden on the command line).
CONFIG_DEFAULTS = dict(
    output_dir="runs",
    use_cpu=True,
    report_to="none",
    save_strategy="no",
    logging_steps=1,
    disable_tqdm=False,
    max_steps=420,  # the schedule of benchmarks/LEARNING.md "Learning through TRL" (≈ 13 min on 2 cores)
    per_device_train_batch_size=128,
    num_generations=8,
    learning_rate=3e-3,
    lr_scheduler_type="linear",
    warmup_steps=0,
    weight_decay=0.0,
    max_grad_norm=1.0,
    beta=0.05,
    temperature=1.0,
    gamma=0.9,
    max_prompt_length=256,
    max_completion_length=256,
    max_tokens_per_turn=8,
    truncated_response="penalize",
    truncation_reward=-0.1,
    seed=1,
)


class StateSummaryObservation(gem_core.ObservationWrapper):
    """Replaces each observation with the env's one-line state summary (`Env.state_summary`)."""

    def observation(self, observation: Any) -> Any:
        summary = self.env.unwrapped.state_summary()
        return observation if summary is None else summary


class IntervalObservation(gem_core.ObservationWrapper):
    """Replaces each observation with the interval still possible, ``target in [6, 8]`` (``--history interval``).

    The whole conversation stays in the packed completion, so the shorter each observation,
    the shorter the sequences the model reads and trains on.
    """

    def observation(self, observation: Any) -> Any:
        env = self.env.unwrapped
        low, high = getattr(env, "low", None), getattr(env, "high", None)
        return observation if low is None or high is None else f"target in [{low}, {high}]"


HISTORY_WRAPPERS = {"summary": [StateSummaryObservation], "interval": [IntervalObservation], "chat": []}


def parse_args(argv: list[str] | None = None) -> tuple[ScriptArgs, Any]:
    """``(ScriptArgs, GemGRPOConfig)`` from the command line (TRL's HfArgumentParser)."""
    from gem_trl import GemGRPOConfig
    from transformers import HfArgumentParser

    parser = HfArgumentParser((ScriptArgs, GemGRPOConfig))
    parser.set_defaults(**CONFIG_DEFAULTS)
    script, config = parser.parse_args_into_dataclasses(args=argv)
    if script.history not in HISTORY_WRAPPERS:
        parser.error(f"--history must be one of {', '.join(HISTORY_WRAPPERS)}, got {script.history!r}")
    if script.format_error not in ("terminate", "retry"):
        parser.error(f"--format_error must be 'terminate' or 'retry', got {script.format_error!r}")
    from gem_core.errors import InvalidArgument
    from gem_core.rl.recipe_cli import parse_env_mix

    try:
        parse_env_mix(script.env_id, flag="--env_id")
    except InvalidArgument as exc:
        parser.error(str(exc))
    return script, config


def play_baseline(env_id: str, seeds: list[int], kind: str) -> dict[str, float] | None:
    """The env's random policy or its oracle on ``seeds``; ``None`` when the env has none."""
    from gem_core.envs.games.oracles import oracle_for

    env = gem_core.make(env_id)
    try:
        if kind == "random":
            env.reset(seed=seeds[0])
            env.unwrapped.sample_random_action()
            choose = lambda e: e.unwrapped.sample_random_action()  # noqa: E731
        else:
            choose = oracle_for(env)
    except (NotImplementedError, KeyError):
        env.close()
        return None
    wins, turns, returns, solved = 0, 0, 0.0, []
    for seed in seeds:
        env.reset(seed=seed)
        t, info = 0, {}
        while True:
            _, reward, terminated, truncated, info = env.step(choose(env))
            t, returns = t + 1, returns + float(reward)
            if terminated or truncated:
                break
        wins += bool(info.get("success"))
        solved += [t] if info.get("success") else []
        turns += t
    env.close()
    n = len(seeds)
    return {"success_rate": wins / n, "mean_turns": turns / n, "turns_to_solve": float(np.mean(solved)) if solved else float("nan"), "mean_return": returns / n}


def episode_metrics(episodes: list[rl.Episode]) -> dict[str, float]:
    """Success rate, turns, return and format errors of a batch of episodes."""
    n = max(len(episodes), 1)
    turns = [t for ep in episodes for t in ep.turns]
    solved = [ep.num_turns for ep in episodes if ep.success]
    return {
        "success_rate": sum(bool(ep.success) for ep in episodes) / n,
        "mean_turns": len(turns) / n,
        "turns_to_solve": float(np.mean(solved)) if solved else float("nan"),
        "mean_return": sum(ep.episode_return for ep in episodes) / n,
        "format_error_rate": sum(t.format_error for t in turns) / max(len(turns), 1),
        "error_episodes": float(sum(ep.error is not None for ep in episodes)),
    }


def plot_learning_curve(path: Path, history: list[dict[str, Any]], evals: list[dict[str, Any]], results: dict[str, Any], title: str) -> None:
    """Training success and turns per step with the held-out results, as a PNG (the CPU recipe's layout)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no learning_curve.png")
        return
    steps = [h["step"] for h in history]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.plot(steps, [h["gem/success_rate"] for h in history], lw=1, label="training batch (sampled)")
    if evals:
        ax1.plot([e["step"] for e in evals], [e["success_rate"] for e in evals], "o-", color="red", label="held-out, greedy")
    if results.get("random"):
        ax1.axhline(results["random"]["success_rate"], color="gray", ls="--", label="random policy")
    if results.get("oracle"):
        ax1.axhline(results["oracle"]["success_rate"], color="green", ls=":", label="oracle")
    ax1.set(xlabel="TRL step", ylabel="success rate", ylim=(-0.02, 1.02))
    ax1.set_title(title, fontsize=10)
    ax1.legend(loc="lower right", fontsize=8)
    ax2.plot(steps, [h["gem/mean_turns"] for h in history], lw=1, label="mean turns (training)")
    ax2.plot(steps, [h.get("entropy", float("nan")) for h in history], lw=1, label="entropy / token")
    if results.get("oracle"):
        ax2.axhline(results["oracle"]["mean_turns"], color="green", ls=":", label="oracle mean turns")
    ax2.set(xlabel="TRL step")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the recipe; returns the summary also written to ``summary.json``."""
    script, config = parse_args(argv)

    # ---- Prologue: run name, seeding, output directory ----------------------------------
    run_name = config.run_name or f"{script.run_name_prefix}__g{config.gamma:g}__{config.seed}__{int(time.time())}"
    run_dir = Path(config.output_dir) / run_name
    run_dir.mkdir(parents=True, exist_ok=True)
    config.output_dir, config.run_name = str(run_dir), run_name
    import torch
    from gem_trl import GemGRPOTrainer, make_dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    from gem_core.rl.testing import TextPolicy, build_tiny_model

    random.seed(config.seed)
    np.random.seed(config.seed)
    torch.manual_seed(config.seed)
    torch.set_num_threads(script.threads)
    (run_dir / "args.json").write_text(json.dumps({"script": dataclasses.asdict(script), "config": config.to_dict()}, indent=2, default=str))
    print(f"run {run_name}: writing to {run_dir}/", flush=True)
    t_start = time.perf_counter()

    # ---- Env, model, formatter ----------------------------------------------------------
    # Your env modules (imported here; accelerate's other processes inherit the variables).
    from gem_core.rl.recipe_cli import use_recipe_env_modules

    use_recipe_env_modules(script.env_module, flag="--env_module")
    from gem_core.rl.recipe_cli import mix_rows, parse_env_mix

    env_mix = parse_env_mix(script.env_id, flag="--env_id")
    env_id = env_mix[0][0]  # the held-out evaluation's, the baselines' and the warm-up's env
    wrappers = HISTORY_WRAPPERS[script.history]  # each falls back to the env's own observation
    takes_format_error = True
    for i, (each, _) in enumerate(env_mix):
        try:
            probe = gem_core.make(each)
            probe.reset(seed=0)
        except gem_core.errors.Error as exc:
            raise SystemExit(f"--env_id {each}: {exc}") from None
        if i == 0:
            lo, hi = getattr(probe.unwrapped, "min_number", None), getattr(probe.unwrapped, "max_number", None)
        probe.close()
        try:  # --format_error for the envs that take it (every env of a mixture gets the same kwargs)
            gem_core.make(each, format_error=script.format_error).close()
        except gem_core.errors.InvalidKwarg:
            takes_format_error = False
    guess = isinstance(lo, int) and isinstance(hi, int)  # GuessTheNumber: the format warm-up applies
    extra: dict[str, Any] = {"format_error": script.format_error} if takes_format_error else {}
    config.env_kwargs = {**(config.env_kwargs or {}), **extra, "wrappers": wrappers}
    rows = mix_rows(env_mix, range(script.train_seeds))
    train_dataset = make_dataset([e for e, _ in rows], [s for _, s in rows])
    if script.dry_run:
        counts = {e: sum(1 for r, _ in rows if r == e) for e, _ in env_mix}
        print(f"dry run: {len(rows)} training rows ({', '.join(f'{e}: {n}' for e, n in counts.items())}); "
              f"held-out evaluation on {env_id}; env kwargs {sorted(extra)}; TRL's GRPO with ReBN, gamma "
              f"{config.gamma:g}, {config.max_steps} steps; not trained", flush=True)
        return {"run_name": run_name, "dry_run": True, "rows": len(rows), "envs": counts}
    eval_kwargs = {"wrappers": wrappers}
    path = script.model
    if path == "tiny":
        path = str(build_tiny_model(hidden=script.hidden, layers=script.layers, heads=script.heads, init_std=script.init_std, seed=config.seed))
    model = AutoModelForCausalLM.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    device = "cpu" if config.use_cpu or not torch.cuda.is_available() else "cuda"
    model.to(device)
    print(f"model {script.model}: {sum(p.numel() for p in model.parameters()) / 1e3:.0f}k parameters", flush=True)

    def formatter() -> rl.ChatFormatter:
        return rl.ChatFormatter(tokenizer, system_prompt=config.system_prompt, max_context=config.max_prompt_length + config.max_completion_length)

    def collect(who: Any, seeds: list[int], sampling: rl.SamplingParams, kwargs: dict[str, Any]) -> list[rl.Episode]:
        return rl.collect_episodes_sync(
            env_id, who, formatter(), seeds=seeds, sampling=sampling, layout="packed", concurrency=len(seeds),
            env_kwargs=kwargs, truncated_response=config.truncated_response, truncation_reward=config.truncation_reward,
        )  # fmt: skip

    eval_seeds = list(range(script.eval_seed_start, script.eval_seed_start + script.eval_episodes))
    greedy = rl.SamplingParams(temperature=0.0, max_new_tokens=config.max_tokens_per_turn or 32)

    def evaluate(m: Any) -> dict[str, float]:
        was_training = m.training  # TransformersPolicy switches the model to eval mode
        policy = rl.TransformersPolicy(m, tokenizer, device=device, max_batch_size=len(eval_seeds))
        try:
            return episode_metrics(collect(policy, eval_seeds, greedy, eval_kwargs))
        finally:
            policy.close()
            m.train(was_training)  # else TRL logs the step's metrics as eval metrics

    results: dict[str, Any] = {
        "random": play_baseline(env_id, eval_seeds, "random"),
        "oracle": play_baseline(env_id, eval_seeds, "oracle"),
        "untrained": evaluate(model),
    }
    results = {k: v for k, v in results.items() if v is not None}  # an env without an oracle / random policy
    print(
        "held-out success: " + ", ".join(f"{k} {v['success_rate']:.2f}" for k, v in results.items()), flush=True
    )

    # ---- Warm-up: supervised steps on random well-formed answers (format only) ----------
    if script.format_warmup_steps > 0 and not guess:
        print(f"no format warm-up: {env_id} is not a GuessTheNumber env (its answer format is its own)")
    if script.format_warmup_steps > 0 and guess:
        rng = random.Random(config.seed)
        random_answers = TextPolicy(tokenizer, lambda _prompt: f"\\boxed{{{rng.randint(lo, hi)}}}")
        warm_seeds = [rng.randrange(script.train_seeds) for _ in range(script.warmup_episodes)]
        warm_episodes = collect(random_answers, warm_seeds, rl.SamplingParams(max_new_tokens=config.max_tokens_per_turn or 32), config.env_kwargs)
        ones = [np.ones(ep.num_turns) for ep in warm_episodes]
        warm = rl.build_training_batch(warm_episodes, ones, pad_token_id=tokenizer.pad_token_id)
        optimizer = torch.optim.Adam(model.parameters(), lr=script.warmup_lr)
        model.train()
        for _ in range(script.format_warmup_steps):
            rows = np.random.choice(warm.num_samples, min(script.warmup_batch_size, warm.num_samples), replace=False)
            mb = {k: v.to(device) if hasattr(v, "to") else v for k, v in warm.select(rows).to_torch().items()}
            logp = rl.sequence_logprobs(model, mb["input_ids"], mb["attention_mask"])
            nll = -(logp * mb["loss_mask"]).sum() / mb["loss_mask"].sum()  # answer tokens only
            optimizer.zero_grad()
            nll.backward()
            optimizer.step()
        model.eval()
        results["warmed_up"] = evaluate(model)
        print(
            f"warm-up: {script.format_warmup_steps} steps, answer NLL/token {nll.item():.3f}; held-out success "
            f"{results['warmed_up']['success_rate']:.2f}, format errors/turn {results['warmed_up']['format_error_rate']:.2f}",
            flush=True,
        )
    start_path = run_dir / "start_model"  # TRL loads its reference model (beta > 0) from the model's path
    model.save_pretrained(start_path)
    tokenizer.save_pretrained(start_path)

    # ---- TRL's GRPO loop with ReBN advantages ------------------------------------------
    evals: list[dict[str, Any]] = []

    class HeldOut(TrainerCallback):
        """Greedy held-out evaluation every ``--eval_every`` steps; early stop on target or time."""

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            elapsed = time.perf_counter() - t_start
            if script.eval_every and state.global_step % script.eval_every == 0 and state.global_step < state.max_steps:
                ev = evaluate(trainer.model)
                evals.append({"step": state.global_step, "time_s": round(time.perf_counter() - t_start, 1), **ev})
                print(f"\nstep {state.global_step}: held-out greedy success {ev['success_rate']:.3f} ({elapsed:.0f} s)", flush=True)
                if script.stop_at_success is not None and ev["success_rate"] >= script.stop_at_success:
                    control.should_training_stop = True
            if script.max_wall_s is not None and elapsed > script.max_wall_s:
                print(f"\nstopping: {elapsed:.0f} s > --max_wall_s {script.max_wall_s:g}", flush=True)
                control.should_training_stop = True
            return control

    trainer = GemGRPOTrainer(
        str(start_path),
        config,
        train_dataset,
        processing_class=tokenizer,
        callbacks=[HeldOut()],
    )
    trainer.train()

    # ---- Report: held-out evaluation, learning curve, summary ---------------------------
    final = evaluate(trainer.model)
    step = trainer.state.global_step
    if not evals or evals[-1]["step"] != step:
        evals.append({"step": step, "time_s": round(time.perf_counter() - t_start, 1), **final})
    results["trained"] = final
    wall = time.perf_counter() - t_start
    history = [h for h in trainer.state.log_history if "gem/success_rate" in h]
    with open(run_dir / "metrics.jsonl", "w") as f:
        for h in trainer.state.log_history:
            f.write(json.dumps(h) + "\n")
    with open(run_dir / "evals.jsonl", "w") as f:
        for e in evals:
            f.write(json.dumps(e) + "\n")
    reached = [e for e in evals if script.stop_at_success is not None and e["success_rate"] >= script.stop_at_success]
    print(f"\nheld-out evaluation, {len(eval_seeds)} env seeds from {script.eval_seed_start}, greedy decoding:")
    print(f"  {'policy':<10} {'success':>8} {'mean turns':>11} {'turns to solve':>15}")
    for name in ("trained", "warmed_up", "untrained", "random", "oracle"):
        if name in results:
            m = results[name]
            print(f"  {name:<10} {m['success_rate']:>8.3f} {m['mean_turns']:>11.2f} {m['turns_to_solve']:>15.2f}")
    print(f"wall time {wall:.0f} s, {step} TRL steps")
    plot_learning_curve(run_dir / "learning_curve.png", history, evals, results, f"{env_id}: TRL + ReBN, γ={config.gamma:g}")
    final_train = copy.deepcopy(history[-1]) if history else {}
    summary = {
        "run_name": run_name,
        "args": {"script": dataclasses.asdict(script), "config": json.loads(json.dumps(config.to_dict(), default=str))},
        "eval": results,
        "evals": evals,
        "final_train": final_train,
        "steps": step,
        "time_to_target_s": reached[0]["time_s"] if reached else None,
        "wall_time_s": wall,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    print(f"wrote {run_dir}/: metrics.jsonl, evals.jsonl, learning_curve.png, summary.json")
    return summary


if __name__ == "__main__":
    main()
