"""The compat matrix on miniature releases: each kind of failure, and
version-guarded overrides accepted on both sides."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.compat_releases import CONNECTOR, install_release, write_tree
from kvflowmap.compat.findings import Finding, Matrix
from kvflowmap.compat.run import run_matrix
from kvflowmap.compat.surface_cache import SurfaceStore
from kvflowmap.protocol import load_protocol


@pytest.fixture()
def matrix(tmp_path: Path) -> Matrix:
    for v in ("0.1.0", "0.2.0"):
        install_release(tmp_path, v)
    src = write_tree(tmp_path / "src", CONNECTOR) / "toyconn"
    return run_matrix(SurfaceStore(tmp_path, load_protocol()), [src], ["0.1.0", "0.2.0"])


def _kinds(m: Matrix, cls: str, release: str) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for f in m.cell(f"toyconn.{cls}", release).findings:
        out.setdefault(f.kind, []).append(f)
    return out


def test_classes_found_through_the_connector_hierarchy(matrix: Matrix) -> None:
    assert matrix.classes == ["toyconn.bad.IteratingConnector", "toyconn.bad.NoSaveConnector",
                              "toyconn.bad.OldConnector", "toyconn.good.GuardedConnector",
                              "toyconn.good.LayeredConnector", "toyconn.good.TryConnector",
                              "toyconn.good.VersionedConnector",
                              "toyconn.good.WrongBranchConnector"]


def test_old_connector_fits_old_release_and_fails_the_new(matrix: Matrix) -> None:
    assert matrix.cell("toyconn.bad.OldConnector", "0.1.0").status == "ok"
    kinds = _kinds(matrix, "bad.OldConnector", "0.2.0")
    assert matrix.cell("toyconn.bad.OldConnector", "0.2.0").status == "fail"
    (ann,) = kinds["ann"]
    assert "annotated set[str]; the base takes kv_connector_metadata: KVConnectorMetadata" \
        in ann.message
    assert ann.where == "toyconn/bad.py:12"
    assert ann.base_where == "vllm/distributed/kv_transfer/kv_connector/v1/base.py:32"
    (pos,) = kinds["pos"]
    assert "__init__ does not accept parameter 'kv_cache_config'" in pos.message
    (member,) = kinds["removed-member"]
    assert "self._old_helper" in member.message and "0.1.0 has it" in member.message
    (env,) = kinds["envs"]
    assert "envs.VLLM_OLD_FLAG" in env.message and env.where == "toyconn/bad.py:16"
    (config,) = kinds["config"]
    assert config.message == ("__init__ reads vllm_config.kv_transfer_config.kv_rank, which vLLM "
                              "0.2.0's KVTransferConfig does not have (vLLM 0.1.0 has it)")
    assert config.where == "toyconn/bad.py:10"
    assert "config" not in _kinds(matrix, "bad.OldConnector", "0.1.0")
    (carrier,) = kinds["carrier"]
    assert "KVConnectorOutput.failed_recving" in carrier.message


def test_newly_abstract_method_not_implemented(matrix: Matrix) -> None:
    assert "abstract" not in _kinds(matrix, "bad.NoSaveConnector", "0.1.0")
    (f,) = _kinds(matrix, "bad.NoSaveConnector", "0.2.0")["abstract"]
    assert "does not implement wait_for_save" in f.message
    # OldConnector has a subclass: it is a base, not instantiated, and is not reported
    assert "abstract" not in _kinds(matrix, "bad.OldConnector", "0.2.0")


def test_unannotated_parameter_used_as_a_collection(matrix: Matrix) -> None:
    assert "collection" not in _kinds(matrix, "bad.IteratingConnector", "0.1.0")
    (f,) = _kinds(matrix, "bad.IteratingConnector", "0.2.0")["collection"]
    assert "uses 'preempted' as a collection" in f.message and f.where == "toyconn/bad.py:30"


def test_hooks_not_called(matrix: Matrix) -> None:
    old = _kinds(matrix, "bad.IteratingConnector", "0.1.0")
    assert [f.severity for f in old["not-yet"]] == ["note"]  # get_transfer_results
    (dead,) = _kinds(matrix, "bad.IteratingConnector", "0.2.0")["not-called"]
    assert dead.message.startswith("get_finished: vLLM 0.2.0 calls it only from the base's "
                                   "get_transfer_results")
    # inherited overrides are reported on the class that defines them only
    assert "ann" not in _kinds(matrix, "bad.IteratingConnector", "0.2.0")


def test_guarded_overrides_accepted_on_both_sides(matrix: Matrix) -> None:
    for release, branch in (("0.1.0", "the isinstance branch"), ("0.2.0", "the other branch")):
        kinds = _kinds(matrix, "good.GuardedConnector", release)
        assert not [f for fs in kinds.values() for f in fs if f.severity == "error"]
        (g,) = [f for f in kinds["guarded"] if "passes preempted as" in f.message]
        assert g.message.endswith(f"{branch} runs")
    assert matrix.cell("toyconn.good.GuardedConnector", "0.1.0").status == "guarded"
    versioned = _kinds(matrix, "good.VersionedConnector", "0.2.0")
    assert [f.severity for f in versioned["guarded"]] == ["guarded"]
    assert "version test" in versioned["guarded"][0].message
    assert matrix.cell("toyconn.good.VersionedConnector", "0.2.0").status == "guarded"


def test_deterministic(tmp_path: Path, matrix: Matrix) -> None:
    src = tmp_path / "src" / "toyconn"
    again = run_matrix(SurfaceStore(tmp_path, load_protocol()), [src], ["0.1.0", "0.2.0"])
    assert again.to_json() == matrix.to_json()


def test_try_except_type_error_and_hasattr_guards(matrix: Matrix) -> None:
    kinds = _kinds(matrix, "good.TryConnector", "0.2.0")
    (g,) = kinds["guarded"]
    assert g.message.startswith("handle_preemptions: parameter 'preempted' is annotated set[str]")
    assert "try/except TypeError at line" in g.message
    # self._old_helper and envs.VLLM_OLD_FLAG behind hasattr: not removed members
    assert "removed-member" not in kinds and "envs" not in kinds
    assert matrix.cell("toyconn.good.TryConnector", "0.2.0").status == "guarded"


def test_self_called_hook_is_alive_and_guarded_import(matrix: Matrix) -> None:
    kinds = _kinds(matrix, "good.LayeredConnector", "0.2.0")
    assert "not-called" not in kinds  # its get_transfer_results calls self.get_finished
    # the try/except ImportError import of KVConnectorTransferResults fails no release
    assert "import" not in _kinds(matrix, "good.LayeredConnector", "0.1.0")
    assert "import" not in _kinds(matrix, "good.GuardedConnector", "0.1.0")


def test_only_the_branch_that_runs_is_checked(matrix: Matrix) -> None:
    # GuardedConnector iterates the argument only when it is a set: accepted on 0.2.0
    uses = [f for f in _kinds(matrix, "good.GuardedConnector", "0.2.0")["guarded"]
            if "as a collection only where it is not a KVConnectorMetadata" in f.message]
    assert len(uses) == 1
    # WrongBranchConnector iterates it on the other branch, the one 0.2.0 takes
    (f,) = _kinds(matrix, "good.WrongBranchConnector", "0.2.0")["collection"]
    assert "on the branch that runs for it" in f.message
    assert f.where == "toyconn/good.py:74"  # sorted(preempted), not len() in the set branch
    assert "collection" not in _kinds(matrix, "good.WrongBranchConnector", "0.1.0")
