"""A query the model cannot read: MiniLM maps most Chinese characters to [UNK], so its vector
of a Chinese query says nothing, and recall ranks that query without the semantic signal.

The real MiniLM (its own tokenizer) and a real SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.adapters import open_service
from engine.config import load_config
from engine.ports import Embedder, ReadsText
from engine.records import MemoryDraft, MemoryFilter
from engine.service import MemoryService

NS = "unread"
CHINESE = [
    "我每天早上喝一杯黑咖啡",
    "周末我喜欢去公园跑步",
    "我的猫叫小白，它三岁了",
    "我对花生过敏",
    "下个月我要去上海出差",
    "我最喜欢的颜色是蓝色",
]


def test_minilm_says_how_much_of_a_text_it_cannot_read(minilm: Embedder) -> None:
    assert isinstance(minilm, ReadsText)
    assert minilm.unread_share("用户最近戒咖啡了") == 1.0  # every character [UNK]
    assert minilm.unread_share("I like the blue theme") == 0.0
    assert 0.0 < minilm.unread_share("我喜欢蓝色的主题") < 1.0  # 我, 的, 主 are in its vocabulary
    assert minilm.unread_share("") == 0.0
    assert minilm.unread_parts("Lisa's favourite dish is 宫保鸡丁") == {"宫", "鸡", "丁"}
    assert minilm.unread_parts("I like the blue theme") == frozenset()


def _filled(data_dir: Path, minilm: Embedder, **recall: float) -> MemoryService:
    service = open_service(load_config(env={}, data_dir=data_dir, recall=recall), embedder=minilm)
    for text in [*CHINESE, "I walk the dog every evening"]:
        service.save(MemoryDraft(text, namespace=NS))
    return service


def test_a_query_the_model_cannot_read_is_ranked_without_the_semantic_signal(data_dir: Path, minilm: Embedder) -> None:
    service = _filled(data_dir, minilm)
    try:
        result = service.recall("我对什么过敏", namespaces=[NS], top_k=5, reinforce=False)
        assert not result.read_by_model
        assert result.hits[0].memory.content == "我对花生过敏"  # the shared words decide
        assert {hit.breakdown.semantic.weight for hit in result.hits} == {0.0}
        # Top_k is still filled; what shares nothing with the query ranks by its decayed
        # score alone (alike here: saved a moment apart), with no noise from a vector of
        # unknown tokens.
        unmatched = [hit.score for hit in result.hits if hit.breakdown.lexical.value == 0]
        assert len(result.hits) == 5 and len(unmatched) == 4
        assert max(unmatched) - min(unmatched) < 1e-6

        english = service.recall("who walks the dog", namespaces=[NS], top_k=5, reinforce=False)
        assert english.read_by_model
        assert english.hits[0].breakdown.semantic.weight == service.config.fusion.semantic > 0
    finally:
        service.close()


def test_a_share_of_one_keeps_the_semantic_signal_whatever_the_model_reads(data_dir: Path, minilm: Embedder) -> None:
    service = _filled(data_dir, minilm, unread_query_share=1.0)
    try:
        result = service.recall("我对什么过敏", namespaces=[NS], top_k=5, reinforce=False)
        assert result.read_by_model
        assert {hit.breakdown.semantic.weight for hit in result.hits} == {service.config.fusion.semantic}
    finally:
        service.close()


@pytest.mark.parametrize("share", [0.0, -0.5, 1.5])
def test_the_share_is_checked_at_start(data_dir: Path, share: float) -> None:
    from engine.errors import ConfigError

    with pytest.raises(ConfigError, match="unread_query_share"):
        load_config(env={}, data_dir=data_dir, recall={"unread_query_share": share})


def test_a_text_the_model_cannot_read_is_not_folded_into_another_by_its_vector(
    data_dir: Path, minilm: Embedder
) -> None:
    # Two prizes of MADial-Bench's Chinese memories: MiniLM reads only "Lisa" in either
    # (cosine about 0.99, above the dedup threshold) and the words mostly repeat, so the
    # painting prize was folded into the essay prize on save, and stayed lost after the
    # store moved to a model that reads Chinese (a fresh store on that model keeps both).
    service = open_service(load_config(env={}, data_dir=data_dir), embedder=minilm)
    try:
        essay = service.save(MemoryDraft("Lisa在学校的作文比赛中赢得了第一名，并且感到非常开心。", namespace=NS))
        painting = service.save(MemoryDraft("Lisa在学校的绘画比赛中获得第一名，感到非常开心。", namespace=NS))
        assert painting.created and painting.deduplicated_by is None
        assert painting.memory.memory_id != essay.memory.memory_id
        # The same text is still one memory (its digest, not its vector, says so) ...
        again = service.save(MemoryDraft("Lisa在学校的绘画比赛中获得第一名，感到非常开心。", namespace=NS))
        assert again.deduplicated_by == "digest" and again.memory.memory_id == painting.memory.memory_id
        # ... and a text the model reads is folded by its vector as before.
        first = service.save(MemoryDraft("I walk my dog every evening after work", namespace=NS))
        repeat = service.save(MemoryDraft("I walk my dog every evening after work.", namespace=NS))
        assert repeat.deduplicated_by == "similar" and repeat.memory.memory_id == first.memory.memory_id
    finally:
        service.close()


def test_texts_the_model_cannot_read_are_merged_by_no_consolidation(data_dir: Path, minilm: Embedder) -> None:
    # The second adds a clause to the first: the words rules take it for a repeat, and MiniLM,
    # reading "Lisa" and a few characters of each, puts them 0.96 apart (above merge_cosine).
    # Not folded on save (the model cannot read it), they were merged into one memory by the
    # next consolidation, on the same vector that stopped the save's fold.
    service = open_service(load_config(env={}, data_dir=data_dir), embedder=minilm)
    try:
        first = service.save(MemoryDraft("Lisa在学校的作文比赛中赢得了第一名，并且感到非常开心。", namespace=NS))
        second = service.save(
            MemoryDraft("Lisa在学校的作文比赛中赢得了第一名，并且感到非常开心，老师也很高兴。", namespace=NS)
        )
        assert second.created and second.memory.memory_id != first.memory.memory_id
        report = service.consolidator.run(NS)
        assert report.merged == 0
        kept = service.list_page([NS], MemoryFilter(), limit=10).items
        assert {m.memory_id for m in kept} == {first.memory.memory_id, second.memory.memory_id}
    finally:
        service.close()


def test_a_text_read_for_the_most_part_is_not_folded_by_its_vector_where_what_it_adds_is_unread(
    data_dir: Path, minilm: Embedder
) -> None:
    # Below the unread share (0.47), but what the second adds, 麻婆豆腐, is four [UNK]s to
    # MiniLM: 0.98 apart, the second was folded into the first and the second dish lost
    # (USE, which reads it, puts them 0.88 apart, and keeps both).
    service = open_service(load_config(env={}, data_dir=data_dir), embedder=minilm)
    try:
        first = service.save(MemoryDraft("Lisa's favourite dish is 宫保鸡丁", namespace=NS))
        second = service.save(MemoryDraft("Lisa's favourite dish is 宫保鸡丁 and 麻婆豆腐", namespace=NS))
        assert second.created and second.deduplicated_by is None
        assert second.memory.memory_id != first.memory.memory_id
        # What the model cannot read, held by the older text too, leaves the vector its say.
        again = service.save(MemoryDraft("Lisa's favourite dish is 宫保鸡丁.", namespace=NS))
        assert again.deduplicated_by == "similar" and again.memory.memory_id == first.memory.memory_id
    finally:
        service.close()
