"""Every module path of the reference GEM imports through `gem_core.compat` with its public names.

The table: the 70 module paths of the reference's head (axon-rl/gem 4069f2f, 2025-12-31) and
the two of gem-llm 0.1.0 it moved (``gem.multiagent``), each with the public names the
module defines (classes, functions, constants; ``__all__``). Each name either works or is a
`NotPorted` placeholder whose error names why and the gem_core equivalent, and that
equivalent imports.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap

import pytest

from gem_core.compat._not_ported import NotPorted, is_placeholder

REFERENCE_MODULES: dict[str, tuple[str, ...]] = {
    'gem': ('Env', 'make', 'make_vec', 'print_envs', 'register'),
    'gem.__about__': ('__version__',),
    'gem.core': ('ActType', 'Env', 'EnvWrapper', 'ObsType'),
    'gem.envs': ('data_names',),
    'gem.envs.code_env': ('CodeEnv', 'logger'),
    'gem.envs.game_env': (),
    'gem.envs.game_env.crosswords': ('CrosswordsEnv',),
    'gem.envs.game_env.crosswords.crosswords': ('CrosswordsEnv',),
    'gem.envs.game_env.fifteen_puzzle': ('FifteenPuzzleEnv',),
    'gem.envs.game_env.game_2048': ('Game2048Env',),
    'gem.envs.game_env.guess_the_number': ('GuessTheNumberEnv',),
    'gem.envs.game_env.hangman': ('HangmanEnv',),
    'gem.envs.game_env.mastermind': ('MastermindEnv',),
    'gem.envs.game_env.minesweeper': ('MinesweeperEnv',),
    'gem.envs.game_env.sokoban': ('SokobanEnv',),
    'gem.envs.game_env.sokoban.sokoban': ('CHANGE_COORDINATES', 'SokobanEnv'),
    'gem.envs.game_env.sokoban.utils': ('CHANGE_COORDINATES', 'best_box_mapping', 'best_room', 'best_room_score', 'box_displacement_score', 'check_initial_deadlocks', 'depth_first_search', 'detect_frozen_deadlocks', 'explored_states', 'generate_room', 'is_deadlock_position', 'is_player_reachable', 'num_boxes', 'place_boxes_and_player', 'place_boxes_and_player_safe', 'reverse_move', 'reverse_playing', 'room_topology_generation'),
    'gem.envs.game_env.sudoku': ('SudokuEnv',),
    'gem.envs.game_env.tower_of_hanoi': ('TowerofHanoiEnv',),
    'gem.envs.game_env.wikigame': (),
    'gem.envs.game_env.wikigame.backend': ('BaseWikiTrawler', 'KiwixWikiTrawler', 'MediaWikiTrawler'),
    'gem.envs.game_env.wikigame.dynamics': ('EideticDynamics', 'FreeNavDynamics', 'NoRegretsDynamics', 'OneBackDynamics', 'WikiGameDynamics'),
    'gem.envs.game_env.wikigame.errors': ('BackendFailureException', 'DisambiguationException', 'QueryPageNotFoundException'),
    'gem.envs.game_env.wikigame.rewards': ('WikiGameReward',),
    'gem.envs.game_env.wikigame.wikigame': ('WikiGameEnv',),
    'gem.envs.game_env.wikigame.wikipage': ('WikipediaPage',),
    'gem.envs.game_env.word_search': ('WordSearchEnv',),
    'gem.envs.game_env.wordle': ('WordleEnv',),
    'gem.envs.math_env': ('FORMAT_ERROR_REWARD', 'MathEnv', 'logger', 'verify_fn'),
    'gem.envs.math_visual_env': ('MathVisualEnv',),
    'gem.envs.mcpmark': ('MCPMarkEnv',),
    'gem.envs.multiagent': ('MultiAgentEnv',),
    'gem.envs.multiagent.multi_agent_env': ('AgentSelector', 'MultiAgentEnv'),
    'gem.envs.qa_env': ('QaEnv', 'apply_prompt', 'logger'),
    'gem.envs.reasoning_gym': ('ReasoningGymEnv',),
    'gem.envs.registration': ('ENV_REGISTRY', 'EnvSpec', 'make', 'make_vec', 'print_envs', 'register'),
    'gem.envs.terminal.docker_env': ('ContainerConfig', 'DockerEnv', 'TaskConfig'),
    'gem.envs.terminal.executor': ('DockerExecutor',),
    'gem.envs.terminal.reward': ('calculate_test_score',),
    'gem.envs.webshop.preprocess': ('BASE_DIR', 'DB_PATH', 'DOCS_PATH', 'RESOURCE_DIR', 'build_documents_jsonl', 'parse_args', 'run'),
    'gem.envs.webshop.utils': ('SimBrowser', 'SimServer', 'app', 'load_products', 'random_idx'),
    'gem.envs.webshop.web_agent_site': (),
    'gem.envs.webshop.web_agent_site.engine': (),
    'gem.envs.webshop.web_agent_site.engine.engine': ('ACTION_TO_TEMPLATE', 'BACK_TO_SEARCH', 'END_BUTTON', 'NEXT_PAGE', 'PREV_PAGE', 'PRODUCT_WINDOW', 'SEARCH_RETURN_N', 'TEMPLATE_DIR', 'TOP_K_ATTR', 'WEBSHOP_DB_PATH', 'clean_product_keys', 'convert_web_app_string_to_var', 'generate_product_prices', 'get_goal_by_idx', 'get_product_by_asin', 'get_product_per_page', 'get_top_n_product_from_keywords', 'get_weights', 'init_search_engine', 'load_products', 'map_action_to_html', 'maybe_json', 'parse_action', 'read_html_template'),
    'gem.envs.webshop.web_agent_site.engine.goal': ('PRICE_RANGE', 'get_attribute_reward', 'get_goals', 'get_human_goals', 'get_option_reward', 'get_reward', 'get_synthetic_goals', 'get_type_reward', 'nlp'),
    'gem.envs.webshop.web_agent_site.engine.normalize': ('COLOR_SET', 'SIZE_PATTERNS', 'SIZE_SET', 'normalize_color', 'normalize_color_size'),
    'gem.envs.webshop.web_agent_site.utils': ('BASE_DIR', 'DEBUG_PROD_SIZE', 'DEFAULT_ATTR_PATH', 'DEFAULT_FILE_PATH', 'DEFAULT_REVIEW_PATH', 'FEAT_CONV', 'FEAT_IDS', 'HUMAN_ATTR_PATH', 'generate_mturk_code', 'setup_logger'),
    'gem.envs.webshop.webshop': ('WEBSHOP_INSTRUCTION_TEMPLATE', 'WebshopEnv', 'tag_visible'),
    'gem.multiagent': ('AgentSelector', 'MultiAgentEnv'),
    'gem.multiagent.multi_agent_env': ('AgentSelector', 'MultiAgentEnv'),
    'gem.tools.base_tool': ('BaseTool',),
    'gem.tools.mcp_server.time_mcp': ('app', 'convert_time', 'current_time', 'days_in_month', 'get_timestamp', 'get_week_year', 'logger', 'relative_time'),
    'gem.tools.mcp_tool': ('MCPTool', 'is_timeout_error', 'logger'),
    'gem.tools.python_code_tool': ('PythonCodeTool',),
    'gem.tools.search_engine.google_search_server': ('Config', 'OnlineSearchEngine', 'SearchRequest', 'SearchResponse', 'SearchWorker', 'fetch', 'fetch_all', 'filter_links', 'parse_snippet', 'sanitize_search_query'),
    'gem.tools.search_engine.retrieval_server': ('BM25Retriever', 'BaseRetriever', 'Config', 'DenseRetriever', 'Encoder', 'QueryRequest', 'RetrievalResponse', 'RetrievalWorker', 'get_retriever', 'load_corpus', 'load_docs', 'load_model', 'pooling', 'read_jsonl'),
    'gem.tools.search_engine.serp_search_server': ('Config', 'OnlineSearchEngine', 'SearchRequest', 'SearchResponse', 'SearchWorker'),
    'gem.tools.search_tool': ('SearchTool', 'TIMEOUT'),
    'gem.tools.tool_env_wrapper': ('ToolEnvWrapper',),
    'gem.utils.constants': ('BASE_IMPORTS', 'BASE_LEETCODE_IMPORTS', 'LanguageGameReward', 'TERMINAL_STATE'),
    'gem.utils.debug': ('ppprint', 'run_and_print_episode', 'run_and_print_episode_async', 'run_and_print_episode_with_selective_step'),
    'gem.utils.math_grader': ('BAD_REGEXES', 'BAD_SUBSTRINGS', 'REMOVED_EXPRESSIONS', 'SUBSTITUTIONS', 'TUPLE_CHARS', 'TimeoutException', 'answer_tag_reward_fn', 'answer_tag_reward_fn_for_orz', 'are_equal_under_sympy', 'boxed_reward_fn', 'count_unknown_letters_in_expr', 'extract_answer', 'extract_boxed_answer', 'grade', 'grade_answer_mathd', 'grade_answer_sympy', 'is_latex_equal', 'is_value_equal', 'last_boxed_only_string', 'latex_eval', 'logger', 'mathd_normalize_answer', 'normalize_final_answer', 'numeric_equal', 'r1_distill_qwen_math_reward_fn', 'remove_boxed', 'repeatness', 'run_with_timeout_signal', 'should_allow_eval', 'split_tuple', 'symbolic_equal', 'timeout', 'unit_texts'),
    'gem.utils.parsing': ('extract_code_from_model', 'extract_last_boxed_answer', 'extract_last_tagged_answer', 'last_boxed_only_string', 'remove_boxed'),
    'gem.utils.qa_em': ('em_check', 'normalize_answer'),
    'gem.utils.sandbox': ('CLI_ARG_SIZE_LIMIT', 'DEFAULT_TIMEOUT', 'ERROR_MSG_PREFIX', 'check_forbidden_imports', 'run_python', 'subprocess_run'),
    'gem.utils.seeding': ('RNG', 'RandomNumberGenerator', 'np_random', 'set_seed'),
    'gem.vector.async_vector_env': ('AsyncVectorEnv', 'step_reset_env'),
    'gem.vector.sync_vector_env': ('SyncVectorEnv',),
    'gem.vector.vector_env': ('ArrayType', 'AutoresetMode', 'VectorEnv'),
    'gem.wrappers.episode_tracking_wrapper': ('EpisodeTrackingWrapper',),
    'gem.wrappers.observation_wrapper': ('ObservationWrapper', 'WrapperObsType', 'maybe_add_new_line'),
    'gem.wrappers.wrapper_factory': ('TOKENIZER_REQUIRED', 'WRAPPER_FACTORY', 'get_wrapper_fns'),
}


def _compat(module: str) -> str:
    return "gem_core.compat" + module[len("gem"):]


def _not_ported(module: object, name: str) -> NotPorted | None:
    """The `NotPorted` a name raises when read or used, or None when it is ported."""
    try:
        value = getattr(module, name)
    except NotPorted as exc:
        return exc
    if not is_placeholder(value):
        return None
    with pytest.raises(NotPorted) as info:
        value()
    with pytest.raises(NotPorted):
        value.some_attribute  # noqa: B018 - reading an attribute of a placeholder raises too
    return info.value


def _check_equivalent(exc: NotPorted) -> None:
    """The equivalent a NotPorted names starts with an importable gem_core dotted path."""
    assert exc.why and exc.reference.startswith("gem.")
    if exc.instead is None:
        assert "no equivalent" in str(exc)
        return
    first = exc.instead.split()[0].split("(")[0]
    parts = first.split(".")
    assert parts[0] == "gem_core", exc.instead
    for cut in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return
    raise AssertionError(f"{exc.instead!r} does not import")


def test_table_has_every_module_path() -> None:
    heads = [m for m in REFERENCE_MODULES if not m.startswith("gem.multiagent")]
    assert len(heads) == 70 and len(REFERENCE_MODULES) == 72


@pytest.mark.parametrize("module_name", sorted(REFERENCE_MODULES))
def test_module_imports_with_its_public_names(module_name: str) -> None:
    module = importlib.import_module(_compat(module_name))
    for name in REFERENCE_MODULES[module_name]:
        exc = _not_ported(module, name)
        if exc is not None:
            _check_equivalent(exc)
            assert exc.reference == f"{module_name}.{name}"


@pytest.mark.parametrize(
    "module_name, name",
    [
        ("gem.envs.math_env", "MathEnv"),
        ("gem.envs.qa_env", "QaEnv"),
        ("gem.envs.code_env", "CodeEnv"),
        ("gem.envs.reasoning_gym", "ReasoningGymEnv"),
        ("gem.envs.game_env.sokoban", "SokobanEnv"),
        ("gem.utils.sandbox", "run_python"),
        ("gem.utils.debug", "run_and_print_episode"),
        ("gem.core", "Env"),
        ("gem.multiagent", "MultiAgentEnv"),
        ("gem.envs.multiagent", "MultiAgentEnv"),
        ("gem.tools.mcp_server.time_mcp", "app"),
    ],
)
def test_names_users_need_are_ported(module_name: str, name: str) -> None:
    module = importlib.import_module(_compat(module_name))
    assert _not_ported(module, name) is None


def test_not_ported_placeholder_subclass_and_constant() -> None:
    from gem_core.compat.envs.webshop import webshop

    class MyShop(webshop.WebshopEnv):  # a subclass imports, and fails when built
        pass

    with pytest.raises(NotPorted, match="gem.envs.webshop.webshop.WebshopEnv is not ported"):
        MyShop()
    with pytest.raises(NotPorted, match="WEBSHOP_INSTRUCTION_TEMPLATE"):
        webshop.WEBSHOP_INSTRUCTION_TEMPLATE  # noqa: B018
    with pytest.raises(AttributeError):
        webshop.no_such_name  # noqa: B018
    assert isinstance(NotPorted("gem.x", None, "why"), NotImplementedError)


def test_every_path_imports_as_gem_without_gem_llm() -> None:
    """Through `install_as_gem` in a fresh process where gem-llm is hidden."""
    code = textwrap.dedent(
        """
        import importlib, importlib.abc, sys
        class Hide(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "gem" or name.startswith("gem."):
                    raise ModuleNotFoundError(name, name=name)
        sys.meta_path.insert(0, Hide())
        import gem_core.compat
        gem_core.compat.install_as_gem()
        for name in NAMES:
            module = importlib.import_module(name)
            assert module.__name__ == "gem_core.compat" + name[3:], (name, module.__name__)
        from gem.utils.sandbox import run_python
        assert run_python("print(input())", "none", stdin="7")[:2] == (True, "7\\n")
        print("ok")
        """
    ).replace("NAMES", repr(sorted(REFERENCE_MODULES)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]
