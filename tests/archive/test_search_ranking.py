"""Ranking a query's matches at a cost that follows the page of results: which way a query
is ranked (a table), and, through a real SearchIndex of many pages, that a common word's
results are the best BM25 ranks among the newest matches and cost the same at 6.7k and 20k
matching pages, while a rarer word keeps the exact ranking over all its matches."""

from __future__ import annotations

import pytest

from wwwproxy.archive.search import SearchIndex
from wwwproxy.archive.search.searching import RANK_CANDIDATES, Ranking, plan_ranking

PAGES = 20_000
SOME_EVERY = 3  # "some" is on every third page: 6,667 of them, more than RANK_CANDIDATES
RARE_EVERY = 100  # "rare" on every hundredth: 200, ranked exactly


@pytest.mark.parametrize(
    ("matches", "candidates", "ranking"),
    [
        (0, RANK_CANDIDATES, Ranking.EXACT),
        (1, RANK_CANDIDATES, Ranking.EXACT),
        (RANK_CANDIDATES, RANK_CANDIDATES, Ranking.EXACT),  # all of them fit: exact
        (RANK_CANDIDATES + 1, RANK_CANDIDATES, Ranking.NEWEST),  # counted up to one more
        (10, 10, Ranking.EXACT),
        (11, 10, Ranking.NEWEST),
        (3_000_000, RANK_CANDIDATES, Ranking.NEWEST),
    ],
)
def test_plan_ranking(matches, candidates, ranking):
    assert plan_ranking(matches, candidates) is ranking


def test_candidates_cover_more_than_a_result_list():
    from wwwproxy.archive.search.searching import MAX_RESULTS

    assert RANK_CANDIDATES > MAX_RESULTS  # a bounded query still fills every result page


def page_text(n: int) -> tuple[str, str]:
    """Page ``n``'s title and text: "common" on every page, more often on some (so the
    scores differ), in the title of every 97th; "some" and "rare" on some pages."""
    words = ["common"] * (2 + n % 3) + [f"filler{n}"] * (1 + n % 7)
    if n % SOME_EVERY == 0:
        words += ["some", "some"]
    if n % RARE_EVERY == 0:
        words += ["rare"] * (2 + n % 5)
    title = f"common page {n}" if n % 97 == 0 else f"page {n}"
    return title, " ".join(words)


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    root = tmp_path_factory.mktemp("ranking")
    index = SearchIndex(root)
    for first in range(0, PAGES, 5000):
        with index.batch():
            for n in range(first, first + 5000):
                title, text = page_text(n)
                index.add(
                    f"http://example.com/{n}", f"http://example.com/{n}", title=title, text=text
                )
    yield index
    index.close()


def scored(index: SearchIndex, word: str) -> list[tuple[str, int, float]]:
    """``(key, doc, BM25 score)`` of every page ``word`` matches in the ranking table."""
    conn = index._conn  # noqa: SLF001 - the reference order, computed apart from the code under test
    rows = conn.execute(
        "SELECT p.key, r.rowid, bm25(page_rank, 10.0, 1.0) FROM page_rank r "
        "JOIN pages p ON p.doc = r.rowid WHERE page_rank MATCH ?",
        (word,),
    ).fetchall()
    return rows


def ranked(index: SearchIndex, word: str, newest: int) -> list[str]:
    """The ``newest`` pages ``word`` matches, ordered by the index's BM25 (the newer first
    among equals): what the results must begin with."""
    rows = sorted(scored(index, word), key=lambda row: -row[1])[:newest]
    rows.sort(key=lambda row: (row[2], -row[1]))
    return [key for key, _, _ in rows]


def steps(index: SearchIndex, query: str) -> int:
    """SQLite virtual machine steps (in thousands) that a search of ``query`` takes."""
    count = 0

    def tick() -> int:
        nonlocal count
        count += 1
        return 0

    conn = index._conn  # noqa: SLF001 - counting the work done on the index's own connection
    conn.set_progress_handler(tick, 1000)
    try:
        index.search(query, 20, 0)
    finally:
        conn.set_progress_handler(None, 0)
    return count


def test_common_word_gives_the_best_ranked_of_the_newest_matches(index):
    results = index.search("common", 20, 0)
    assert results.bounded and results.total == 1000
    expected = ranked(index, "common", RANK_CANDIDATES)
    assert [h.key for h in results.hits] == expected[:20]
    # a title match among the newest pages comes first, as BM25 weighs titles ten times
    assert results.hits[0].title.startswith("common page")
    second = index.search("common", 20, 20)
    assert [h.key for h in second.hits] == expected[20:40]


def test_bounded_ranking_leaves_out_old_pages_about_the_word(index):
    """The trade-off, documented: an old page with the word in its title is not ranked."""
    keys = {h.key for h in index.search("common", 1000, 0).hits}
    assert "http://example.com/97" not in keys  # title "common page 97", indexed first
    assert f"http://example.com/{PAGES - PAGES % 97 - 97}" in keys  # a newer one is


def test_a_rarer_word_keeps_the_exact_ranking_over_all_its_matches(index):
    results = index.search("rare", 1000, 0)
    assert not results.bounded
    assert results.total == PAGES // RARE_EVERY
    score = {key: value for key, _, value in scored(index, "rare")}
    keys = [h.key for h in results.hits]
    assert set(keys) == set(score)  # all of them, the oldest too
    assert [score[k] for k in keys] == sorted(score.values())  # each by its BM25


def test_cost_does_not_grow_with_the_matching_pages(index):
    some = index.search("some", 20, 0)
    common = index.search("common", 20, 0)
    assert some.bounded and common.bounded
    few, many = steps(index, "some"), steps(index, "common")  # 6,667 and 20,000 matches
    assert many < few * 1.3, (few, many)
    rare = steps(index, "rare")
    assert rare < few  # exact over its 200 matches: cheaper still


def test_a_miss_reads_no_page_it_does_not_match(index):
    """A word in no page's text and no URL costs the same whatever the cache's size: the
    URLs' trigrams say at once that no URL has it (every URL was read before)."""
    assert index.search("zzqxmiss").total == 0
    assert steps(index, "zzqxmiss") < 5
    assert index.search("example.com/19999").total == 1  # found by its URL
