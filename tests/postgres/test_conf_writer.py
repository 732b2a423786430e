"""blocklab.conf as the server reads it (issue 31 item 10): every value that is not a
number is quoted (a dotted word unquoted is a parse error that stops the server), and
blocklab's reserved settings come last, after anything an experiment sets."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from blocklab import proc
from blocklab.postgres.cluster import RESERVED_LAST, SETTINGS_FILE, Cluster, quote_setting
from blocklab.postgres.installation import Installation
from blocklab.state import State


def test_every_value_but_a_number_is_quoted() -> None:
    assert quote_setting("pg_catalog.english") == "'pg_catalog.english'"
    assert quote_setting("on") == "'on'"
    assert quote_setting("archive_command") == "'archive_command'"
    for number in ("128MB", "16384", "-1", "0.5", "1e3", "0x10", "30s", ".5"):
        assert quote_setting(number) == number
    assert quote_setting("'already'") == "'already'"
    assert quote_setting("1 # x") == "'1 # x'"


def test_the_reserved_settings_are_written_last(tmp_path: Path) -> None:
    me = pwd.getpwuid(os.getuid())
    user = proc.User(me.pw_name, me.pw_uid, me.pw_gid, me.pw_dir)
    data = tmp_path / "data"
    data.mkdir()
    (data / "postgresql.conf").write_text("# initdb's\n")
    inst = Installation(Path("/p"), "k", "18.1", 8192, 8192)
    c = Cluster(inst, data, socket_dir=tmp_path / "s", user=user, state=State(tmp_path / "st"))
    c.write_settings({"work_mem": "64MB", "default_text_search_config": "pg_catalog.english"})
    lines = (data / SETTINGS_FILE).read_text().splitlines()
    names = [line.split(" = ")[0] for line in lines[1:]]
    assert names[-len(RESERVED_LAST) :] == list(RESERVED_LAST)
    assert "default_text_search_config = 'pg_catalog.english'" in lines
    assert "work_mem = 64MB" in lines
