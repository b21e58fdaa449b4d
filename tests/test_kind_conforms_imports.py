"""The ``conforms`` import check (``kvc-imports-resolve``): what a connector
imports from the analysed vLLM exists there."""

from __future__ import annotations

from pathlib import Path

from kvflowmap.api import Request, analyse
from kvflowmap.check.engine import run_rules
from kvflowmap.check.model import AppliesTo, Finding, Rule

BASE = "vllm.distributed.kv_transfer.kv_connector.v1.base.KVConnectorBase_V1"
# A small vLLM: the base module, a utils package with a submodule, a module that
# builds its names at run time, and a compiled extension listed in the RECORD.
VLLM = {
    "vllm/__init__.py": "",
    "vllm/distributed/__init__.py": "",
    "vllm/distributed/kv_transfer/__init__.py": "",
    "vllm/distributed/kv_transfer/kv_connector/__init__.py": "",
    "vllm/distributed/kv_transfer/kv_connector/v1/__init__.py": "",
    "vllm/distributed/kv_transfer/kv_connector/v1/base.py":
        "class KVConnectorBase_V1:\n    def wait_for_save(self):\n        return None\n",
    "vllm/utils/__init__.py": "from vllm.utils.net import get_ip\nMAX = 3\n",
    "vllm/utils/net.py": "def get_ip():\n    return ''\n",
    "vllm/utils/torch_utils.py": "def get_dtype():\n    return None\n",
    "vllm/lazy.py": "def __getattr__(name):\n    return name\n",
    "vllm/envs.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                     "    VLLM_HOST_IP: str = ''\nenvironment_variables = {}\n"
                     "def __getattr__(name):\n    return environment_variables[name]()\n"),
    "vllm-9.9.9.dist-info/METADATA": "Name: vllm\nVersion: 9.9.9\n",
    "vllm-9.9.9.dist-info/RECORD": "vllm/__init__.py,,\nvllm/_C.abi3.so,sha256=x,1\n",
}
HEAD = "from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1\n"


def rule() -> Rule:
    return Rule(id="t-imports", title="t", severity="error", rationale="r", kind="conforms",
                params=dict(signatures=False, abstract=False, missing_members=False,
                            imports=True),
                applies_to=AppliesTo(base_class=(BASE,)), examples=(), help="h", pack="test",
                path=Path("t.yaml"))


def check(tree, files: dict[str, str], *, with_vllm: bool = True) -> list[Finding]:
    subject = tree(files)
    context = [str(tree(VLLM))] if with_vllm else []
    analysis = analyse(Request(sources=[str(subject)], context=context))
    return run_rules(analysis, [rule()])


def found(findings: list[Finding]) -> list[tuple[str, int]]:
    return sorted((f.function, f.line) for f in findings)


def test_a_name_the_module_no_longer_defines_and_a_module_that_is_gone(tree):
    findings = check(tree, {"conn/__init__.py": HEAD + (
        "from vllm.utils import get_dtype, get_ip, MAX\n"
        "from vllm.attention.backends.abstract import AttentionMetadata\n"
        "import vllm.v1.attention.selector\n"
        "\n"
        "class Conn(KVConnectorBase_V1):\n"
        "    pass\n"),
        # analysed, so the finding can say where the name lives now
        "conn/compat.py": "try:\n    import vllm.utils.torch_utils\nexcept ImportError:\n    pass\n"})
    assert found(findings) == [("conn", 2), ("conn", 3), ("conn", 4)]
    by_line = {f.line: f.message for f in findings}
    assert by_line[2].startswith("imports get_dtype from vllm.utils, which vllm 9.9.9")
    assert "(vllm.utils.torch_utils defines get_dtype)" in by_line[2]
    assert "vLLM cannot load Conn" in by_line[2]
    assert by_line[3].startswith("imports module vllm.attention,")
    assert by_line[4].startswith("imports module vllm.v1,")


def test_an_import_inside_a_function_fails_at_its_first_call(tree):
    findings = check(tree, {"conn/helpers.py": (
        "def load():\n"
        "    from vllm.utils import get_dtype\n"
        "    return get_dtype()\n")})
    assert found(findings) == [("conn.helpers.load", 2)]
    assert "the first call of load() raises ImportError" in findings[0].message


def test_fallbacks_gates_submodules_natives_and_dynamic_modules_are_left_alone(tree):
    findings = check(tree, {"conn/__init__.py": HEAD + (
        "from typing import TYPE_CHECKING\n"
        "from vllm.utils import net, MAX\n"
        "from vllm import _C\n"
        "import vllm._C\n"
        "from vllm.lazy import anything\n"
        "from .sibling import nothing_here\n"
        "try:\n"
        "    from vllm.utils.torch_utils import get_kv_dtype\n"
        "except ImportError:\n"
        "    from vllm.utils import get_kv_dtype\n"
        "if MAX > 2:\n"
        "    from vllm.attention import Attention\n"
        "if TYPE_CHECKING:\n"
        "    from vllm.attention.layer import Layer\n"),
        "conn/sibling.py": ""})
    assert found(findings) == []


def test_nothing_is_judged_without_a_vllm(tree):
    findings = check(tree, {"conn/__init__.py": "from vllm.utils import get_dtype\n"},
                     with_vllm=False)
    assert findings == []


def test_a_vllm_envs_variable_the_release_does_not_declare(tree):
    findings = check(tree, {"conn/__init__.py": (
        "import vllm.envs as envs\n"
        "from vllm import envs as E\n"
        "\n"
        "def port():\n"
        "    return envs.VLLM_HOST_IP, envs.VLLM_OLD_PORT, E.VLLM_GONE, envs.environment_variables\n")})
    assert [(f.function, f.line) for f in findings] == [("conn.port", 5), ("conn.port", 5)]
    assert sorted(f.message.split(",")[0] for f in findings) == [
        "reads E.VLLM_GONE", "reads envs.VLLM_OLD_PORT"]
    assert "vllm.envs of vllm 9.9.9 does not declare: AttributeError here" in findings[0].message
