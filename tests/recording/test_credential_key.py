"""The cache's key for the digests of credentials: made once, private, shared by every process
of the cache; a cache where it cannot be kept still runs (with a key for that run)."""

from __future__ import annotations

import logging
import stat
from concurrent.futures import ThreadPoolExecutor

from wwwproxy.recording.engine import CREDENTIAL_KEY_FILE, credential_key


def test_made_once_private_and_kept(tmp_path):
    key = credential_key(tmp_path)
    path = tmp_path / CREDENTIAL_KEY_FILE
    assert len(key) == 32 and path.read_bytes() == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert credential_key(tmp_path) == key  # the next start reads it back
    assert [p.name for p in tmp_path.iterdir()] == [CREDENTIAL_KEY_FILE]  # no temporary left


def test_makers_at_the_same_time_agree_on_one_key(tmp_path):
    with ThreadPoolExecutor(8) as pool:
        keys = set(pool.map(lambda _: credential_key(tmp_path), range(16)))
    assert keys == {(tmp_path / CREDENTIAL_KEY_FILE).read_bytes()}


def test_a_damaged_key_is_replaced(tmp_path):
    (tmp_path / CREDENTIAL_KEY_FILE).write_bytes(b"short")
    key = credential_key(tmp_path)
    assert len(key) == 32 and (tmp_path / CREDENTIAL_KEY_FILE).read_bytes() == key


def test_a_cache_where_it_cannot_be_kept_gets_a_key_for_the_run(tmp_path, caplog):
    not_a_directory = tmp_path / "file"
    not_a_directory.write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="wwwproxy.recording"):
        first, second = credential_key(not_a_directory), credential_key(not_a_directory)
    assert len(first) == 32 and first != second
    assert "cannot keep the credentials key" in caplog.text
