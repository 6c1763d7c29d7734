"""The endpoints file: written atomically, read back with clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestra_ops.errors import ConfigError
from orchestra_ops.fleet.endpoints import read_endpoints, write_endpoints

SAMPLE = {"Qwen/Qwen3-32B-FP8": [{"ip_addr": "research-secure-12", "port": 1820},
                                 {"ip_addr": "research-secure-12", "port": 1821}],
          "retrieval": [{"ip_addr": "research-secure-13", "port": 8765}]}


def test_round_trip_and_format(tmp_path: Path) -> None:
    path = write_endpoints(tmp_path / "sub" / "model_config.json", SAMPLE)  # type: ignore[arg-type]
    assert json.loads(path.read_text()) == SAMPLE
    assert read_endpoints(path) == SAMPLE
    assert [p.name for p in path.parent.iterdir()] == ["model_config.json"]  # no temp file left


def test_rewrite_replaces_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "model_config.json"
    write_endpoints(path, SAMPLE)  # type: ignore[arg-type]
    write_endpoints(path, {"m": [{"ip_addr": "h", "port": 1}]})
    assert read_endpoints(path) == {"m": [{"ip_addr": "h", "port": 1}]}


def test_string_ports_from_hand_written_files_become_ints(tmp_path: Path) -> None:
    path = tmp_path / "e.json"
    path.write_text(json.dumps({"m": [{"ip_addr": "h", "port": "1820"}]}))
    assert read_endpoints(path) == {"m": [{"ip_addr": "h", "port": 1820}]}


@pytest.mark.parametrize(("content", "message"), [
    ("{", "e.json:1: not valid JSON"),
    ("[]", "e.json: an endpoints file is a JSON object"),
    ('{"m": []}', "e.json: m: expected a non-empty list"),
    ('{"m": [{"ip_addr": "h"}]}', 'e.json: m[0]: expected {"ip_addr": …, "port": …}'),
    ('{"m": [{"ip_addr": "h", "port": 0}]}', "e.json: m[0].port: 0 is not a port number"),
    ('{"m": [{"ip_addr": "h", "port": true}]}', "e.json: m[0].port: True is not a port number"),
])
def test_bad_files_name_file_and_key(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "e.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as info:
        read_endpoints(path)
    assert str(info.value).startswith(f"{tmp_path}/{message}")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such endpoints file"):
        read_endpoints(tmp_path / "none.json")
