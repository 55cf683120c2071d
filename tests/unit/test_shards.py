"""``--shard I/N`` and the environment's shard: parsing, and which source wins when."""

from __future__ import annotations

import pytest

from ocrflow.config import ScaleOptions
from ocrflow.config.environment import shard_settings
from ocrflow.errors import ConfigError
from ocrflow.executors.plan import worker_options
from ocrflow.executors.shards import Shard, choose_shard, parse_shard
from ocrflow.workspace.records import WorkItem
from ocrflow.workspace.workitems import item_id_for

SLURM = {"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "7", "SLURM_ARRAY_TASK_MIN": "1"}
CLOUD_RUN = {"CLOUD_RUN_TASK_INDEX": "2", "CLOUD_RUN_TASK_COUNT": "4"}
KUBERNETES = {"JOB_COMPLETION_INDEX": "3"}


def pair(shard: Shard | None) -> tuple[int, int] | None:
    return None if shard is None else (shard.index, shard.count)


@pytest.mark.parametrize(
    ("text", "expected"), [("0/1", (0, 1)), ("2/7", (2, 7)), (" 6 / 7 ", (6, 7))]
)
def test_parse_shard(text: str, expected: tuple[int, int]) -> None:
    assert pair(parse_shard(text)) == expected


@pytest.mark.parametrize("text", ["7/7", "1/0", "-1/3", "3", "a/b", "1/3/5", ""])
def test_parse_shard_refuses(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_shard(text)


def test_one_based_index_is_explained() -> None:
    with pytest.raises(ConfigError, match="count from 0"):
        parse_shard("3/3")


def test_no_flag_no_sharding_even_with_platform_variables() -> None:
    """An array task may convert inputs of its own: the platform alone never shards."""
    for variables in ({}, SLURM, CLOUD_RUN, KUBERNETES, SLURM | CLOUD_RUN | KUBERNETES):
        assert choose_shard(None, None, None, variables) is None


def test_flag_wins_over_environment() -> None:
    variables = {"OCRFLOW_SHARD_INDEX": "0", "OCRFLOW_SHARD_COUNT": "2"} | SLURM
    assert pair(choose_shard("1/3", None, None, variables)) == (1, 3)


def test_older_flags_are_aliases() -> None:
    assert pair(choose_shard(None, 2, 5, SLURM)) == (2, 5)
    options = worker_options(ScaleOptions(), 1, 4)
    assert (options.shard_index, options.num_shards) == (1, 4)
    with pytest.raises(ConfigError, match="go together"):
        choose_shard(None, 2, None, {})
    with pytest.raises(ConfigError, match="not both"):
        choose_shard("1/3", 1, 3, {})
    with pytest.raises(ConfigError, match="count from 0"):
        choose_shard(None, 5, 5, {})


def test_worker_options_take_a_shard() -> None:
    options = worker_options(ScaleOptions(), shard=Shard(2, 3))
    assert (options.shard_index, options.num_shards) == (2, 3)
    plain = worker_options(ScaleOptions())
    assert (plain.shard_index, plain.num_shards) == (None, None)


def test_ocrflow_variables_ask_for_sharding() -> None:
    variables = {"OCRFLOW_SHARD_INDEX": "4", "OCRFLOW_SHARD_COUNT": "6"}
    assert pair(choose_shard(None, None, None, variables)) == (4, 6)
    # Its own index wins over a platform's; its own count over a platform's.
    assert pair(choose_shard(None, None, None, variables | SLURM)) == (4, 6)
    with pytest.raises(ConfigError, match="OCRFLOW_SHARD_COUNT"):
        choose_shard(None, None, None, {"OCRFLOW_SHARD_INDEX": "1"} | KUBERNETES)


def test_count_from_ocrflow_index_from_the_platform() -> None:
    count = {"OCRFLOW_SHARD_COUNT": "5"}
    assert pair(choose_shard(None, None, None, count | KUBERNETES)) == (3, 5)
    assert pair(choose_shard("auto", None, None, count | CLOUD_RUN)) == (2, 5)
    with pytest.raises(ConfigError, match=r"not in 0\.\.4"):
        choose_shard(None, None, None, count | {"JOB_COMPLETION_INDEX": "5"})


def test_auto_takes_a_platforms_pair() -> None:
    assert pair(choose_shard("auto", None, None, SLURM)) == (4, 7)  # --array=1-7: task 5
    assert pair(choose_shard("AUTO", None, None, CLOUD_RUN)) == (2, 4)
    stepped = {"SLURM_ARRAY_TASK_ID": "8", "SLURM_ARRAY_TASK_COUNT": "4"}
    step = {"SLURM_ARRAY_TASK_STEP": "4"}
    assert pair(choose_shard("auto", None, None, stepped | step)) == (2, 4)
    with pytest.raises(ConfigError, match="evenly spaced"):
        choose_shard("auto", None, None, stepped | {"SLURM_ARRAY_TASK_STEP": "3"})


def test_auto_needs_an_index_and_a_count() -> None:
    with pytest.raises(ConfigError, match="no shard index"):
        choose_shard("auto", None, None, {})
    with pytest.raises(ConfigError, match="JOB_COMPLETION_INDEX is set but no shard count"):
        choose_shard("auto", None, None, KUBERNETES)
    with pytest.raises(ConfigError, match="CLOUD_RUN_TASK_COUNT must be a whole number"):
        choose_shard("auto", None, None, CLOUD_RUN | {"CLOUD_RUN_TASK_COUNT": "four"})


def test_shard_settings_read_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OCRFLOW_SHARD_INDEX", "OCRFLOW_SHARD_COUNT", *SLURM, *CLOUD_RUN, *KUBERNETES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "3")
    monkeypatch.setenv("OCRFLOW_SHARD_COUNT", "")  # empty: unset
    monkeypatch.setenv("UNRELATED_INDEX", "1")
    assert shard_settings() == {"JOB_COMPLETION_INDEX": "3"}
    monkeypatch.setenv("OCRFLOW_SHARD_COUNT", "4")
    assert pair(choose_shard(None, None, None, shard_settings())) == (3, 4)


def test_shards_partition_items_with_their_ranges() -> None:
    items = [
        WorkItem(item_id=item_id_for(f"/in/{n}.pdf", f"{n}.pdf", "fp"), uri="", rel="", kind="",
                 size=0)
        for n in range(300)
    ]  # fmt: skip
    for count in (1, 3, 7):
        owners = [[s for s in range(count) if Shard(s, count).holds(i)] for i in items]
        assert all(len(o) == 1 for o in owners)
        assert all(any(o == [s] for o in owners) for s in range(count))
    split = items[0].model_copy(update={"item_id": f"{items[0].item_id}@1-500", "first": 1})
    assert all(Shard(s, 7).holds(split) == Shard(s, 7).holds(items[0]) for s in range(7))
