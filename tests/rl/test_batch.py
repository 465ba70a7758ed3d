"""Training tensors from episodes: rows are the kit's packed samples."""

from __future__ import annotations

import numpy as np
import pytest

from gem_core.errors import InvalidArgument
from gem_core.rl.batch import build_training_batch
from gem_core.rl.packing import pack_episode
from gem_core.rl.types import Episode, Turn


def _episode(layout: str = "packed") -> Episode:
    ep = Episode(env_id="x", seed=0, layout=layout)
    per_turn = layout == "per_turn"
    ep.turns = [
        Turn([1, 2], [10, 11], [-0.1, -0.2], reward=0.5),
        Turn([3], [], [], reward=-0.1, starts_sample=per_turn),  # generated nothing
        Turn([4, 5], [12], [-0.3], reward=1.0, starts_sample=per_turn),
    ]
    return ep


def test_packed_rows_are_pack_episode_and_an_empty_turn_gets_no_token():
    ep = _episode()
    batch = build_training_batch([ep], [np.array([1.0, 2.0, 3.0])], pad_token_id=-1)
    p = pack_episode(ep)
    assert batch.input_ids[0].tolist() == p.token_ids == [1, 2, 10, 11, 3, 4, 5, 12]
    assert batch.loss_mask[0].tolist() == p.loss_mask == [0, 0, 1, 1, 0, 0, 0, 1]
    # Turn 1 has no token: its advantage (2.0) is written nowhere.
    assert batch.advantages[0].tolist() == [0, 0, 1, 1, 0, 0, 0, 3]
    np.testing.assert_allclose(batch.old_logprobs[0], [0, 0, -0.1, -0.2, 0, 0, 0, -0.3], atol=1e-7)
    assert batch.num_loss_tokens == 3


def test_per_turn_rows_one_per_turn():
    ep = _episode("per_turn")
    batch = build_training_batch([ep], [np.array([1.0, 2.0, 3.0])], pad_token_id=-1)
    assert batch.num_samples == 3 and batch.episode_index.tolist() == [0, 0, 0]
    assert batch.input_ids.tolist() == [[1, 2, 10, 11], [3, -1, -1, -1], [4, 5, 12, -1]]
    assert batch.advantages.tolist() == [[0, 0, 1, 1], [0, 0, 0, 0], [0, 0, 3, 0]]
    assert batch.lengths.tolist() == [4, 1, 3]


def test_errors_name_the_episode():
    ep = _episode()
    with pytest.raises(InvalidArgument, match="episode 0 has 3 turns but 2 advantages"):
        build_training_batch([ep], [np.zeros(2)])
    ep.turns[0].response_logprobs = [0.0]
    with pytest.raises(InvalidArgument, match="episode 0, turn 0: 2 response tokens but 1 logprobs"):
        build_training_batch([ep], [np.zeros(3)])
    with pytest.raises(InvalidArgument, match="got 0 advantage arrays for 1 episodes"):
        build_training_batch([ep], [])
