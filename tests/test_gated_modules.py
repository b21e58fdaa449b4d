"""Modules a plugin imports only under a test of vLLM's version are not judged
against another release (``check.gated_modules``)."""

from __future__ import annotations

from kvflowmap.api import Request, analyse
from kvflowmap.check.engine import run_rules
from kvflowmap.check.gated_modules import gated_off
from kvflowmap.check.model import Finding
from tests.test_kind_conforms_imports import HEAD, VLLM, rule

CONNECTOR = HEAD + (
    "from conn import patches\n"
    "\n"
    "class Conn(KVConnectorBase_V1):\n"
    "    pass\n")
PATCHES = (
    "import vllm\n"
    "from vllm.utils import MAX\n"
    "\n"
    "def get_vllm_version():\n"
    "    return vllm.__version__\n"
    "\n"
    "def vllm_version_is(v):\n"
    "    return vllm.__version__ == v\n"
    "\n"
    "def apply():\n"
    "    version = get_vllm_version()\n"
    "    match version:\n"
    "        case '0.11.0' | '0.11.1':\n"
    "            import conn.v0110.patch\n"
    "        case '9.9.9':\n"
    "            import conn.current.patch\n"
    "        case _:\n"
    "            import conn.fallback\n"
    "    ascend_version = get_vllm_ascend_version()\n"
    "    match ascend_version:\n"
    "        case '0.11.0':\n"
    "            import conn.ascend_v0110\n"
    "        case '9.9.0rc1':\n"
    "            import conn.ascend_current\n"
    "    if vllm_version_is('0.9.1'):\n"
    "        from conn import v091\n"
    "    elif vllm.__version__ >= '9.0':\n"
    "        from conn import newer\n")
OLD = "from vllm.attention import AttentionMetadata\n"  # gone in the small vLLM


def _files() -> dict[str, str]:
    return {"conn/__init__.py": "", "conn/connector.py": CONNECTOR, "conn/patches.py": PATCHES,
            "conn/v0110/__init__.py": "", "conn/v0110/patch.py": "from conn.v0110 import helper\n",
            "conn/v0110/helper.py": OLD, "conn/current/__init__.py": "",
            "conn/current/patch.py": OLD, "conn/fallback.py": OLD, "conn/v091.py": OLD,
            "conn/newer.py": OLD, "conn/orphan.py": OLD, "conn/ascend_v0110.py": OLD,
            "conn/ascend_current.py": OLD}


def _check(tree) -> tuple[dict[str, str], list[Finding]]:
    analysis = analyse(Request(sources=[str(tree(_files()))], context=[str(tree(VLLM))]))
    return (gated_off(analysis.linker.model, analysis.vllm_version, ("vllm_ascend",)),
            run_rules(analysis, [rule()]))


def test_only_modules_behind_a_false_version_gate_are_left_out(tree):
    gated, findings = _check(tree)
    assert sorted(gated) == ["conn.ascend_v0110", "conn.fallback", "conn.v0110",
                             "conn.v0110.helper", "conn.v0110.patch", "conn.v091"]
    assert "case '0.11.0'" not in gated["conn.v0110.patch"]  # the gate as a test
    assert "(version) == ('0.11.0')" in gated["conn.v0110.patch"]
    # judged: the release's own patch, the `elif` that holds, and what nothing imports
    # a platform plugin released with vLLM 9.9 (a release candidate of it) is not cut off
    assert sorted(f.function for f in findings) == [
        "conn.ascend_current", "conn.current.patch", "conn.newer", "conn.orphan"]


def test_an_unknown_release_gates_nothing(tree):
    files = dict(VLLM)
    files.pop("vllm-9.9.9.dist-info/METADATA")
    files.pop("vllm-9.9.9.dist-info/RECORD")
    analysis = analyse(Request(sources=[str(tree(_files()))], context=[str(tree(files))]))
    assert analysis.vllm_version is None
    assert gated_off(analysis.linker.model, analysis.vllm_version) == {}
