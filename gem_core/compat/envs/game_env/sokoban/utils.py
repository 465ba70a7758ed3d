"""Reference ``gem.envs.game_env.sokoban.utils``: not ported (room generation internals of the reference's Sokoban).

Every public name imports; using one raises `NotPorted`, naming gem_core.envs.games.sokoban.SokobanEnv.
"""

from __future__ import annotations

from gem_core.compat._not_ported import missing_values, placeholders

_WHY = "room generation internals of the reference's Sokoban"
_INSTEAD = 'gem_core.envs.games.sokoban.SokobanEnv'

__all__ = ['box_displacement_score', 'check_initial_deadlocks', 'depth_first_search', 'detect_frozen_deadlocks', 'generate_room', 'is_deadlock_position', 'is_player_reachable', 'place_boxes_and_player', 'place_boxes_and_player_safe', 'reverse_move', 'reverse_playing', 'room_topology_generation']

(box_displacement_score, check_initial_deadlocks, depth_first_search, detect_frozen_deadlocks, generate_room, is_deadlock_position, is_player_reachable, place_boxes_and_player, place_boxes_and_player_safe, reverse_move, reverse_playing, room_topology_generation) = placeholders(
    __name__, ('box_displacement_score', 'check_initial_deadlocks', 'depth_first_search', 'detect_frozen_deadlocks', 'generate_room', 'is_deadlock_position', 'is_player_reachable', 'place_boxes_and_player', 'place_boxes_and_player_safe', 'reverse_move', 'reverse_playing', 'room_topology_generation'), instead=_INSTEAD, why=_WHY
)
__getattr__ = missing_values(__name__, ('CHANGE_COORDINATES', 'best_box_mapping', 'best_room', 'best_room_score', 'explored_states', 'num_boxes'), instead=_INSTEAD, why=_WHY)
