"""The built-in env catalog: a flat list of `register` calls; nothing heavy is imported here."""

from __future__ import annotations

from gem_core.registration import register

register(
    "toy:Echo-v0",
    "gem_core.envs.toy:EchoEnv",
    max_turns=4,
    description="Repeat a random word back (cheapest env; tests and benchmarks).",
)
register(
    "toy:PrimeCount-v0",
    "gem_core.envs.toy:PrimeCountEnv",
    max_turns=8,
    description="Count the primes <= N; each step runs a Python sieve (CPU-heavy benchmark env).",
)

# --- Games (gem_core.envs.games): the reference GEM's ids and difficulty settings. ---
# GuessTheNumber
register(
    "game:GuessTheNumber-v0-easy",
    "gem_core.envs.games.guess_the_number:GuessTheNumberEnv",
    kwargs={"min_number": 1, "max_number": 10},
    max_turns=4,
    pass_max_turns=True,
    description="Find a hidden integer from higher/lower hints. (easy)",
)
register(
    "game:GuessTheNumber-v0-hard",
    "gem_core.envs.games.guess_the_number:GuessTheNumberEnv",
    kwargs={"min_number": 1, "max_number": 50},
    max_turns=7,
    pass_max_turns=True,
    description="Find a hidden integer from higher/lower hints. (hard)",
)
register(
    "game:GuessTheNumber-v0-random",
    "gem_core.envs.games.guess_the_number:GuessTheNumberEnv",
    kwargs={"min_number": None, "max_number": None},
    max_turns=None,
    pass_max_turns=True,
    description="Find a hidden integer from higher/lower hints. (random)",
)
# Sokoban
register(
    "game:Sokoban-v0-easy",
    "gem_core.envs.games.sokoban:SokobanEnv",
    kwargs={"dim_room": (6, 6), "num_boxes": 2},
    max_turns=20,
    pass_max_turns=True,
    description="Push boxes onto targets (rooms solvable by construction). (easy)",
)
register(
    "game:Sokoban-v0-hard",
    "gem_core.envs.games.sokoban:SokobanEnv",
    kwargs={"dim_room": (8, 8), "num_boxes": 4},
    max_turns=50,
    pass_max_turns=True,
    description="Push boxes onto targets (rooms solvable by construction). (hard)",
)
register(
    "game:Sokoban-v0-random",
    "gem_core.envs.games.sokoban:SokobanEnv",
    kwargs={"dim_room": None, "num_boxes": None},
    max_turns=None,
    pass_max_turns=True,
    description="Push boxes onto targets (rooms solvable by construction). (random)",
)
# Crosswords
register(
    "game:Crosswords-v0-easy",
    "gem_core.envs.games.crosswords:CrosswordsEnv",
    kwargs={"hardcore": False, "num_words": 3},
    max_turns=30,
    pass_max_turns=True,
    description="Fill a small crossword from clues. (easy)",
)
register(
    "game:Crosswords-v0-hard",
    "gem_core.envs.games.crosswords:CrosswordsEnv",
    kwargs={"hardcore": True, "num_words": 3},
    max_turns=40,
    pass_max_turns=True,
    description="Fill a small crossword from clues. (hard)",
)
register(
    "game:Crosswords-v0-random",
    "gem_core.envs.games.crosswords:CrosswordsEnv",
    kwargs={"hardcore": None, "num_words": None},
    max_turns=None,
    pass_max_turns=True,
    description="Fill a small crossword from clues. (random)",
)
# WordSearch
register(
    "game:WordSearch-v0-easy",
    "gem_core.envs.games.word_search:WordSearchEnv",
    kwargs={"num_words": 5, "hardcore": False},
    max_turns=20,
    pass_max_turns=True,
    description="Find hidden words in a letter grid. (easy)",
)
register(
    "game:WordSearch-v0-hard",
    "gem_core.envs.games.word_search:WordSearchEnv",
    kwargs={"num_words": 5, "hardcore": True},
    max_turns=20,
    pass_max_turns=True,
    description="Find hidden words in a letter grid. (hard)",
)
register(
    "game:WordSearch-v0-random",
    "gem_core.envs.games.word_search:WordSearchEnv",
    kwargs={"num_words": None, "hardcore": None},
    max_turns=None,
    pass_max_turns=True,
    description="Find hidden words in a letter grid. (random)",
)
# FifteenPuzzle
register(
    "game:FifteenPuzzle-v0-easy",
    "gem_core.envs.games.fifteen_puzzle:FifteenPuzzleEnv",
    kwargs={"num_rows": 2},
    max_turns=10,
    pass_max_turns=True,
    description="Slide tiles into order. (easy)",
)
register(
    "game:FifteenPuzzle-v0-hard",
    "gem_core.envs.games.fifteen_puzzle:FifteenPuzzleEnv",
    kwargs={"num_rows": 4},
    max_turns=50,
    pass_max_turns=True,
    description="Slide tiles into order. (hard)",
)
register(
    "game:FifteenPuzzle-v0-random",
    "gem_core.envs.games.fifteen_puzzle:FifteenPuzzleEnv",
    kwargs={"num_rows": None},
    max_turns=None,
    pass_max_turns=True,
    description="Slide tiles into order. (random)",
)
# Sudoku
register(
    "game:Sudoku-v0-easy",
    "gem_core.envs.games.sudoku:SudokuEnv",
    kwargs={"clues": 10, "scale": 4},
    max_turns=15,
    pass_max_turns=True,
    description="Fill a Sudoku grid (unique solution). (easy)",
)
register(
    "game:Sudoku-v0-hard",
    "gem_core.envs.games.sudoku:SudokuEnv",
    kwargs={"clues": 50, "scale": 9},
    max_turns=50,
    pass_max_turns=True,
    description="Fill a Sudoku grid (unique solution). (hard)",
)
register(
    "game:Sudoku-v0-random",
    "gem_core.envs.games.sudoku:SudokuEnv",
    kwargs={"clues": None, "scale": None},
    max_turns=None,
    pass_max_turns=True,
    description="Fill a Sudoku grid (unique solution). (random)",
)
# TowerofHanoi
register(
    "game:TowerofHanoi-v0-easy",
    "gem_core.envs.games.tower_of_hanoi:TowerofHanoiEnv",
    kwargs={"num_disks": 3},
    max_turns=10,
    pass_max_turns=True,
    description="Move a tower of disks between three pegs. (easy)",
)
register(
    "game:TowerofHanoi-v0-hard",
    "gem_core.envs.games.tower_of_hanoi:TowerofHanoiEnv",
    kwargs={"num_disks": 5},
    max_turns=35,
    pass_max_turns=True,
    description="Move a tower of disks between three pegs. (hard)",
)
register(
    "game:TowerofHanoi-v0-random",
    "gem_core.envs.games.tower_of_hanoi:TowerofHanoiEnv",
    kwargs={"num_disks": None},
    max_turns=None,
    pass_max_turns=True,
    description="Move a tower of disks between three pegs. (random)",
)
# Game2048
register(
    "game:Game2048-v0-easy",
    "gem_core.envs.games.game_2048:Game2048Env",
    kwargs={"target_tile": 64},
    max_turns=50,
    pass_max_turns=True,
    description="Merge tiles to reach a target tile. (easy)",
)
register(
    "game:Game2048-v0-hard",
    "gem_core.envs.games.game_2048:Game2048Env",
    kwargs={"target_tile": 512},
    max_turns=50,
    pass_max_turns=True,
    description="Merge tiles to reach a target tile. (hard)",
)
register(
    "game:Game2048-v0-extreme-hard",
    "gem_core.envs.games.game_2048:Game2048Env",
    kwargs={"target_tile": 2048},
    max_turns=100,
    pass_max_turns=True,
    description="Merge tiles to reach a target tile. (extreme-hard)",
)
register(
    "game:Game2048-v0-random",
    "gem_core.envs.games.game_2048:Game2048Env",
    kwargs={"target_tile": None},
    max_turns=None,
    pass_max_turns=True,
    description="Merge tiles to reach a target tile. (random)",
)
# Mastermind
register(
    "game:Mastermind-v0-easy",
    "gem_core.envs.games.mastermind:MastermindEnv",
    kwargs={"code_length": 2, "num_numbers": 6, "duplicate_numbers": False},
    max_turns=10,
    pass_max_turns=True,
    description="Crack a secret code from black/white peg feedback. (easy)",
)
register(
    "game:Mastermind-v0-hard",
    "gem_core.envs.games.mastermind:MastermindEnv",
    kwargs={"code_length": 4, "num_numbers": 8, "duplicate_numbers": False},
    max_turns=30,
    pass_max_turns=True,
    description="Crack a secret code from black/white peg feedback. (hard)",
)
register(
    "game:Mastermind-v0-random",
    "gem_core.envs.games.mastermind:MastermindEnv",
    kwargs={"code_length": None, "num_numbers": None, "duplicate_numbers": False},
    max_turns=None,
    pass_max_turns=True,
    description="Crack a secret code from black/white peg feedback. (random)",
)
# Minesweeper
register(
    "game:Minesweeper-v0-easy",
    "gem_core.envs.games.minesweeper:MinesweeperEnv",
    kwargs={"rows": 5, "cols": 5, "num_mines": 5},
    max_turns=25,
    pass_max_turns=True,
    description="Reveal every safe cell without hitting a mine. (easy)",
)
register(
    "game:Minesweeper-v0-hard",
    "gem_core.envs.games.minesweeper:MinesweeperEnv",
    kwargs={"rows": 8, "cols": 8, "num_mines": 12},
    max_turns=64,
    pass_max_turns=True,
    description="Reveal every safe cell without hitting a mine. (hard)",
)
register(
    "game:Minesweeper-v0-random",
    "gem_core.envs.games.minesweeper:MinesweeperEnv",
    kwargs={"rows": None, "cols": None, "num_mines": None},
    max_turns=None,
    pass_max_turns=True,
    description="Reveal every safe cell without hitting a mine. (random)",
)
# Wordle
register(
    "game:Wordle-v0-easy",
    "gem_core.envs.games.wordle:WordleEnv",
    kwargs={"word_length": 3, "only_real_words": True},
    max_turns=15,
    pass_max_turns=True,
    description="Guess a hidden word from per-letter feedback. (easy)",
)
register(
    "game:Wordle-v0-hard",
    "gem_core.envs.games.wordle:WordleEnv",
    kwargs={"word_length": 5, "only_real_words": True},
    max_turns=25,
    pass_max_turns=True,
    description="Guess a hidden word from per-letter feedback. (hard)",
)
register(
    "game:Wordle-v0-random",
    "gem_core.envs.games.wordle:WordleEnv",
    kwargs={"word_length": None, "only_real_words": True},
    max_turns=None,
    pass_max_turns=True,
    description="Guess a hidden word from per-letter feedback. (random)",
)
# Hangman
register(
    "game:Hangman-v0-easy",
    "gem_core.envs.games.hangman:HangmanEnv",
    kwargs={"word_length": 3, "hardcore": False},
    max_turns=10,
    pass_max_turns=True,
    description="Guess a hidden word letter by letter. (easy)",
)
register(
    "game:Hangman-v0-hard",
    "gem_core.envs.games.hangman:HangmanEnv",
    kwargs={"word_length": 7, "hardcore": False},
    max_turns=20,
    pass_max_turns=True,
    description="Guess a hidden word letter by letter. (hard)",
)
register(
    "game:Hangman-v0-random",
    "gem_core.envs.games.hangman:HangmanEnv",
    kwargs={"word_length": None, "hardcore": False},
    max_turns=None,
    pass_max_turns=True,
    description="Guess a hidden word letter by letter. (random)",
)

# --- Math (gem_core.envs.math): math:*, eval:MATH500 and the other math eval ids. ---
register(
    "math:ASDiv2K",
    "gem_core.envs.math:MathEnv",
    kwargs={"dataset_name": "axon-rl/ASDIV-2k", "split": "train", "question_key": "problem", "answer_key": "answer", "env_id": "math:ASDiv2K"},
    max_turns=1,
    pass_max_turns=True,
    offline=False,
    description="ASDiv arithmetic word problems: one \\boxed{} answer, graded by math-verify.",
)
register(
    "math:GSM8K",
    "gem_core.envs.math:MathEnv",
    kwargs={"dataset_name": "axon-rl/GSM-8k", "split": "train", "question_key": "problem", "answer_key": "answer", "env_id": "math:GSM8K"},
    max_turns=1,
    pass_max_turns=True,
    offline=False,
    description="GSM8K grade-school word problems: one \\boxed{} answer, graded by math-verify.",
)
register(
    "math:Math12K",
    "gem_core.envs.math:MathEnv",
    kwargs={"dataset_name": "axon-rl/MATH-12k", "split": "train", "question_key": "problem", "answer_key": "answer", "env_id": "math:Math12K"},
    max_turns=1,
    pass_max_turns=True,
    offline=False,
    description="MATH competition problems (12k): one \\boxed{} answer, graded by math-verify.",
)
register(
    "math:Math8K-3to5",
    "gem_core.envs.math:MathEnv",
    kwargs={"dataset_name": "axon-rl/MATH-lvl3to5-8k", "split": "train", "question_key": "problem", "answer_key": "answer", "env_id": "math:Math8K-3to5"},
    max_turns=1,
    pass_max_turns=True,
    offline=False,
    description="MATH competition problems, levels 3-5: one \\boxed{} answer, graded by math-verify.",
)
register(
    "math:Orz57K",
    "gem_core.envs.math:MathEnv",
    kwargs={"dataset_name": "axon-rl/ORZ-57k", "split": "train", "question_key": "problem", "answer_key": "answer", "env_id": "math:Orz57K"},
    max_turns=1,
    pass_max_turns=True,
    offline=False,
    description="Open-Reasoner-Zero math problems: one \\boxed{} answer, graded by math-verify.",
)
register(
    "math:DeepScaleR40K",
    "gem_core.envs.math:MathEnv",
    kwargs={"dataset_name": "axon-rl/DeepScaleR-40K", "split": "train", "question_key": "problem", "answer_key": "answer", "env_id": "math:DeepScaleR40K"},
    max_turns=1,
    pass_max_turns=True,
    offline=False,
    description="DeepScaleR math problems: one \\boxed{} answer, graded by math-verify.",
)
register(
    "eval:MATH500",
    "gem_core.envs.math:MathEnv",
    kwargs={"dataset_name": "axon-rl/math-eval", "split": "math", "question_key": "problem", "answer_key": "answer", "env_id": "eval:MATH500"},
    max_turns=1,
    pass_max_turns=True,
    offline=False,
    description="MATH500 evaluation set: one \\boxed{} answer, graded by math-verify.",
)
register(
    "eval:AMC",
    "gem_core.envs.math:MathEnv",
    kwargs={"dataset_name": "axon-rl/math-eval", "split": "amc", "question_key": "problem", "answer_key": "answer", "env_id": "eval:AMC"},
    max_turns=1,
    pass_max_turns=True,
    offline=False,
    description="AMC evaluation set: one \\boxed{} answer, graded by math-verify.",
)
register(
    "eval:OlympiadBench",
    "gem_core.envs.math:MathEnv",
    kwargs={"dataset_name": "axon-rl/math-eval", "split": "olympiad_bench", "question_key": "problem", "answer_key": "answer", "env_id": "eval:OlympiadBench"},
    max_turns=1,
    pass_max_turns=True,
    offline=False,
    description="OlympiadBench evaluation set: one \\boxed{} answer, graded by math-verify.",
)
register(
    "eval:Minerva",
    "gem_core.envs.math:MathEnv",
    kwargs={"dataset_name": "axon-rl/math-eval", "split": "minerva", "question_key": "problem", "answer_key": "answer", "env_id": "eval:Minerva"},
    max_turns=1,
    pass_max_turns=True,
    offline=False,
    description="Minerva math evaluation set: one \\boxed{} answer, graded by math-verify.",
)
register(
    "eval:AIME24",
    "gem_core.envs.math:MathEnv",
    kwargs={"dataset_name": "axon-rl/math-eval", "split": "aime24", "question_key": "problem", "answer_key": "answer", "env_id": "eval:AIME24"},
    max_turns=1,
    pass_max_turns=True,
    offline=False,
    description="AIME 2024 evaluation set: one \\boxed{} answer, graded by math-verify.",
)
# (math: end)

# --- Math with images (gem_core.envs.math_visual): math:Geometry3K and its eval id. ---
register(
    "math:Geometry3K",
    "gem_core.envs.math_visual:MathVisualEnv",
    kwargs={"dataset_name": "axon-rl/geometry3k", "split": "train", "image_key": "images", "question_key": "problem", "answer_key": "answer", "env_id": "math:Geometry3K"},
    max_turns=1,
    pass_max_turns=True,
    offline=False,
    description="Geometry3K: questions about a diagram (text + images), one \\boxed{} answer.",
)
register(
    "eval:Geometry3K",
    "gem_core.envs.math_visual:MathVisualEnv",
    kwargs={"dataset_name": "axon-rl/geometry3k", "split": "test", "image_key": "images", "question_key": "problem", "answer_key": "answer", "env_id": "eval:Geometry3K"},
    max_turns=1,
    pass_max_turns=True,
    offline=False,
    description="Geometry3K test split: questions about a diagram (text + images), one \\boxed{} answer.",
)
# (math_visual: end)

# --- QA (gem_core.envs.qa): qa:*, logic:RuleTaker-*, eval:QaOpen and the search-QA eval ids. ---
for _depth in (0, 1, 2, 3, 5):
    register(
        f"logic:RuleTaker-d{_depth}",
        "gem_core.envs.qa:QaEnv",
        kwargs={"env_id": f"logic:RuleTaker-d{_depth}", "dataset_name": f"axon-rl/RuleTaker-d{_depth}-70k",
                "split": "train", "question_key": "question", "answer_key": "answer", "extract_boxed": True},
        description=f"Is a statement True/False/Unknown given rules and facts (proof depth <= {_depth}).",
        offline=False,
    )
for _id, _dataset, _split, _qkey, _what in (
    ("qa:NaturalQuestions", "axon-rl/NaturalQuestions", "train", "problem", "Natural Questions"),
    ("qa:HotpotQA", "axon-rl/HotpotQA", "train", "problem", "HotpotQA multi-hop"),
    ("eval:QaOpen", "google-research-datasets/nq_open", "validation", "question", "NQ-open (eval)"),
    ("eval:2Wiki", "axon-rl/search-eval", "2wiki", "question", "2WikiMultihopQA (search eval)"),
    ("eval:PopQA", "axon-rl/search-eval", "popqa", "question", "PopQA (search eval)"),
    ("eval:TriviaQA", "axon-rl/search-eval", "tq", "question", "TriviaQA (search eval)"),
    ("eval:HotpotQA", "axon-rl/search-eval", "hotpotqa", "question", "HotpotQA (search eval)"),
    ("eval:Bamboogle", "axon-rl/search-eval", "bamboogle", "question", "Bamboogle (search eval)"),
    ("eval:NaturalQuestions", "axon-rl/search-eval", "nq", "question", "Natural Questions (search eval)"),
    ("eval:Musique", "axon-rl/search-eval", "musique", "question", "MuSiQue (search eval)"),
):
    register(
        _id,
        "gem_core.envs.qa:QaEnv",
        kwargs={"env_id": _id, "dataset_name": _dataset, "split": _split, "question_key": _qkey,
                "answer_key": "answer"},
        description=f"{_what} questions; exact-match reward (reward='f1' for token F1).",
        offline=False,
    )
# (qa: end)

# --- Code (gem_core.envs.code): code:*, eval:CodeContest. ---
for _id, _dataset, _split, _what in (
    ("code:CodeContest", "axon-rl/CodeContest", "train", "CodeContests"),
    ("code:Taco8k", "axon-rl/TACO-8k", "train", "TACO"),
    ("code:PrimeIntellect15k", "axon-rl/PrimeIntellect-15k", "train", "PrimeIntellect"),
    ("eval:CodeContest", "axon-rl/CodeContest", "test", "CodeContests test split (eval)"),
):
    register(
        _id,
        "gem_core.envs.code:CodeEnv",
        kwargs={"env_id": _id, "dataset_name": _dataset, "split": _split, "question_key": "problem",
                "test_key": "tests"},
        description=f"{_what} problems: write a Python program, graded by sandboxed tests.",
        offline=False,
    )
# (code: end)

# --- ReasoningGym (gem_core.envs.reasoning_gym): rg:<name>, from a static name list. ---
# A static tuple of names: importing it does not import reasoning_gym.
from gem_core.envs.reasoning_gym import REGISTERED_NAMES as _RG_NAMES  # noqa: E402

for _rg_name in _RG_NAMES:
    register(
        f"rg:{_rg_name}",
        "gem_core.envs.reasoning_gym:ReasoningGymEnv",
        kwargs={"name": _rg_name, "size": 500, "seed": 42},
        max_turns=1,
        description=f"ReasoningGym '{_rg_name}': one generated task, scored by its own score_answer.",
    )
# (rg: end)

# --- Terminal (gem_core.envs.terminal): terminal:* shell tasks in the sandbox. ---
register(
    "terminal:archive-extract-v0",
    "gem_core.envs.terminal:TerminalEnv",
    kwargs={"task": "archive-extract"},
    max_turns=20,
    pass_max_turns=True,
    description="Shell task in the sandbox: Extract a tar.gz bundle and re-pack a filtered subset of it.",
    offline=True,
)
register(
    "terminal:count-lines-v0",
    "gem_core.envs.terminal:TerminalEnv",
    kwargs={"task": "count-lines"},
    max_turns=20,
    pass_max_turns=True,
    description="Shell task in the sandbox: Count the lines of every .txt file under a directory tree.",
    offline=True,
)
register(
    "terminal:csv-aggregate-v0",
    "gem_core.envs.terminal:TerminalEnv",
    kwargs={"task": "csv-aggregate"},
    max_turns=20,
    pass_max_turns=True,
    description="Shell task in the sandbox: Aggregate revenue per region from a CSV file.",
    offline=True,
)
register(
    "terminal:find-replace-v0",
    "gem_core.envs.terminal:TerminalEnv",
    kwargs={"task": "find-replace"},
    max_turns=20,
    pass_max_turns=True,
    description="Shell task in the sandbox: Rename a function across a source tree (whole words only), leaving vendored code alone.",
    offline=True,
)
register(
    "terminal:fix-permissions-v0",
    "gem_core.envs.terminal:TerminalEnv",
    kwargs={"task": "fix-permissions"},
    max_turns=20,
    pass_max_turns=True,
    description="Shell task in the sandbox: Set file modes: executable scripts, private secrets.",
    offline=True,
)
register(
    "terminal:fix-shell-script-v0",
    "gem_core.envs.terminal:TerminalEnv",
    kwargs={"task": "fix-shell-script"},
    max_turns=20,
    pass_max_turns=True,
    description="Shell task in the sandbox: Fix a broken backup shell script (quoting, variables) and run it.",
    offline=True,
)
register(
    "terminal:json-edit-v0",
    "gem_core.envs.terminal:TerminalEnv",
    kwargs={"task": "json-edit"},
    max_turns=20,
    pass_max_turns=True,
    description="Shell task in the sandbox: Edit a nested JSON config file with python3 and keep it valid.",
    offline=True,
)
register(
    "terminal:log-analysis-v0",
    "gem_core.envs.terminal:TerminalEnv",
    kwargs={"task": "log-analysis"},
    max_turns=20,
    pass_max_turns=True,
    description="Shell task in the sandbox: Count HTTP status codes and the worst 404 path in an access log.",
    offline=True,
)
register(
    "terminal:make-dir-tree-v0",
    "gem_core.envs.terminal:TerminalEnv",
    kwargs={"task": "make-dir-tree"},
    max_turns=20,
    pass_max_turns=True,
    description="Shell task in the sandbox: Create a project skeleton: directories and files with given content.",
    offline=True,
)
register(
    "terminal:python-bugfix-v0",
    "gem_core.envs.terminal:TerminalEnv",
    kwargs={"task": "python-bugfix"},
    max_turns=20,
    pass_max_turns=True,
    description="Shell task in the sandbox: Fix a bug in a small Python script (median of an even-sized list).",
    offline=True,
)
register(
    "terminal:rename-files-v0",
    "gem_core.envs.terminal:TerminalEnv",
    kwargs={"task": "rename-files"},
    max_turns=20,
    pass_max_turns=True,
    description="Shell task in the sandbox: Rename files by pattern (zero-padded numbers, lower-case extension).",
    offline=True,
)
register(
    "terminal:sort-dedup-v0",
    "gem_core.envs.terminal:TerminalEnv",
    kwargs={"task": "sort-dedup"},
    max_turns=20,
    pass_max_turns=True,
    description="Shell task in the sandbox: Normalise, deduplicate and sort a list of e-mail addresses.",
    offline=True,
)
register(
    "terminal:word-frequency-v0",
    "gem_core.envs.terminal:TerminalEnv",
    kwargs={"task": "word-frequency"},
    max_turns=20,
    pass_max_turns=True,
    description="Shell task in the sandbox: Top-5 word frequencies of a text file (case-insensitive, ties alphabetical).",
    offline=True,
)
register(
    "terminal:Mixed-v0",
    "gem_core.envs.terminal:TerminalEnv",
    kwargs={"task": None},
    max_turns=20,
    pass_max_turns=True,
    description="Shell tasks in the sandbox: one of the terminal:* tasks per reset (seeded).",
    offline=True,
)
# (terminal: end)

# --- MCP tasks (gem_core.envs.mcp_tasks): mcp:* tasks over the shipped SQLite MCP server. ---
register(
    "mcp:CustomerCity-v0",
    "gem_core.envs.mcp_tasks.env:MCPTaskEnv",
    kwargs={"task": "CustomerCity"},
    max_turns=24,
    pass_max_turns=True,
    description="Find the city of the customer with a given email. (lookup; shop MCP server)",
)
register(
    "mcp:ProductStock-v0",
    "gem_core.envs.mcp_tasks.env:MCPTaskEnv",
    kwargs={"task": "ProductStock"},
    max_turns=24,
    pass_max_turns=True,
    description="Find how many units of a product (given by name) are in stock. (lookup; shop MCP server)",
)
register(
    "mcp:LatestOrderStatus-v0",
    "gem_core.envs.mcp_tasks.env:MCPTaskEnv",
    kwargs={"task": "LatestOrderStatus"},
    max_turns=24,
    pass_max_turns=True,
    description="Find the status of a customer's most recent order. (lookup; shop MCP server)",
)
register(
    "mcp:CheapestInCategory-v0",
    "gem_core.envs.mcp_tasks.env:MCPTaskEnv",
    kwargs={"task": "CheapestInCategory"},
    max_turns=24,
    pass_max_turns=True,
    description="Find the SKU of the cheapest product of a category. (lookup; shop MCP server)",
)
register(
    "mcp:OrderTotal-v0",
    "gem_core.envs.mcp_tasks.env:MCPTaskEnv",
    kwargs={"task": "OrderTotal"},
    max_turns=24,
    pass_max_turns=True,
    description="Compute an order's total from its items' unit prices. (aggregate; shop MCP server)",
)
register(
    "mcp:CustomerSpend-v0",
    "gem_core.envs.mcp_tasks.env:MCPTaskEnv",
    kwargs={"task": "CustomerSpend"},
    max_turns=24,
    pass_max_turns=True,
    description="Sum what a customer spent over their orders that were not cancelled. (aggregate; shop MCP server)",
)
register(
    "mcp:CategoryRevenue-v0",
    "gem_core.envs.mcp_tasks.env:MCPTaskEnv",
    kwargs={"task": "CategoryRevenue"},
    max_turns=24,
    pass_max_turns=True,
    description="Sum the revenue of a product category over delivered orders. (aggregate; shop MCP server)",
)
register(
    "mcp:TopCustomer-v0",
    "gem_core.envs.mcp_tasks.env:MCPTaskEnv",
    kwargs={"task": "TopCustomer"},
    max_turns=24,
    pass_max_turns=True,
    description="Find the customer of a city who spent the most (orders not cancelled). (aggregate; shop MCP server)",
)
register(
    "mcp:LowStockCount-v0",
    "gem_core.envs.mcp_tasks.env:MCPTaskEnv",
    kwargs={"task": "LowStockCount"},
    max_turns=24,
    pass_max_turns=True,
    description="Count the products of a category with fewer than k units in stock. (aggregate; shop MCP server)",
)
register(
    "mcp:AddCustomer-v0",
    "gem_core.envs.mcp_tasks.env:MCPTaskEnv",
    kwargs={"task": "AddCustomer"},
    max_turns=24,
    pass_max_turns=True,
    description="Register a new customer. (insert; shop MCP server)",
)
register(
    "mcp:PlaceOrder-v0",
    "gem_core.envs.mcp_tasks.env:MCPTaskEnv",
    kwargs={"task": "PlaceOrder"},
    max_turns=24,
    pass_max_turns=True,
    description="Place a two-product order for a customer given by email. (insert; shop MCP server)",
)
register(
    "mcp:Restock-v0",
    "gem_core.envs.mcp_tasks.env:MCPTaskEnv",
    kwargs={"task": "Restock"},
    max_turns=24,
    pass_max_turns=True,
    description="Add a delivery of n units to a product's stock. (update; shop MCP server)",
)
register(
    "mcp:CancelOrder-v0",
    "gem_core.envs.mcp_tasks.env:MCPTaskEnv",
    kwargs={"task": "CancelOrder"},
    max_turns=24,
    pass_max_turns=True,
    description="Cancel a customer's pending order (its items go back to stock). (update; shop MCP server)",
)
register(
    "mcp:PriceIncrease-v0",
    "gem_core.envs.mcp_tasks.env:MCPTaskEnv",
    kwargs={"task": "PriceIncrease"},
    max_turns=24,
    pass_max_turns=True,
    description="Raise every price of a category by p percent. (update; shop MCP server)",
)
register(
    "mcp:ShipPendingOrders-v0",
    "gem_core.envs.mcp_tasks.env:MCPTaskEnv",
    kwargs={"task": "ShipPendingOrders"},
    max_turns=24,
    pass_max_turns=True,
    description="Mark every pending order placed on or before a date as shipped. (update; shop MCP server)",
)
register(
    "mcp:Mixed-v0",
    "gem_core.envs.mcp_tasks.env:MCPTaskEnv",
    kwargs={"task": None},
    max_turns=24,
    pass_max_turns=True,
    description="A task drawn per episode from the 15 mcp:* shop tasks (shop MCP server).",
)
# (mcp: end)

# --- tau (gem_core.envs.tau): customer-service conversations, the user played by a simulator. ---
register(
    "tau:Retail-v0",
    "gem_core.envs.tau.env:make_retail_env",
    kwargs={"tasks": "base", "on_violation": "refuse"},
    max_turns=30,
    pass_max_turns=True,
    description="Retail customer service over SQLite with a simulated user (23 base tasks; scripted user by default).",
)
register(
    "tau:Retail-v0-hard",
    "gem_core.envs.tau.env:make_retail_env",
    kwargs={"tasks": "hard", "on_violation": "terminate"},
    max_turns=40,
    pass_max_turns=True,
    description="Retail customer service, hard: 14 multi-request tasks; a policy violation ends the episode.",
)
