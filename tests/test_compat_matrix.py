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
    assert matrix.classes == [
        "toyconn.bad.ExtraArgConnector", "toyconn.bad.IteratingConnector",
        "toyconn.bad.NoSaveConnector",
        "toyconn.bad.OldConnector", "toyconn.bad.OldInitConnector",
        "toyconn.bad.OldReturnConnector", "toyconn.bad.UnannotatedReturnConnector",
        "toyconn.good.GuardedConnector", "toyconn.good.HasattrConnector",
        "toyconn.good.LayeredConnector", "toyconn.good.NoneGuardConnector",
        "toyconn.good.TryConnector",
        "toyconn.good.TryWrongConnector", "toyconn.good.VersionBranchConnector",
        "toyconn.good.VersionedConnector", "toyconn.good.WrongBranchConnector",
        "toyconn.good.WrongHasattrConnector", "toyconn.good.WrongVersionConnector"]


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
    assert [f.severity for f in versioned["guarded"]] == ["guarded", "guarded"]
    assert "version test" in versioned["guarded"][0].message
    assert versioned["guarded"][1].message.endswith(
        'vllm.__version__ >= "0.2" at line 87: the if branch runs on vLLM 0.2.0')
    assert matrix.cell("toyconn.good.VersionedConnector", "0.2.0").status == "guarded"


def test_deterministic(tmp_path: Path, matrix: Matrix) -> None:
    src = tmp_path / "src" / "toyconn"
    again = run_matrix(SurfaceStore(tmp_path, load_protocol()), [src], ["0.1.0", "0.2.0"])
    assert again.to_json() == matrix.to_json()


def test_try_except_type_error_and_hasattr_guards(matrix: Matrix) -> None:
    kinds = _kinds(matrix, "good.TryConnector", "0.2.0")
    g = kinds["guarded"][0]
    assert g.message.startswith("handle_preemptions: parameter 'preempted' is annotated set[str]")
    assert "try/except TypeError at line" in g.message
    assert [f.where for f in kinds["guarded"]] == ["toyconn/good.py:48", "toyconn/good.py:56",
                                                   "toyconn/good.py:57", "toyconn/good.py:58"]
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
            if "as a collection" in f.message]
    (use,) = uses
    assert use.message.endswith("accepted: isinstance(preempted, set) at line 25: the other "
                                "branch runs on vLLM 0.2.0")
    # WrongBranchConnector iterates it on the other branch, the one 0.2.0 takes
    (f,) = _kinds(matrix, "good.WrongBranchConnector", "0.2.0")["collection"]
    assert f.where == "toyconn/good.py:80"  # sorted(preempted), not len() in the set branch
    assert "collection" not in _kinds(matrix, "good.WrongBranchConnector", "0.1.0")


def _errors(m: Matrix, cls: str, release: str) -> list[Finding]:
    return [f for f in m.cell(f"toyconn.{cls}", release).findings if f.severity == "error"]


def test_hasattr_picks_the_branch_per_release(matrix: Matrix) -> None:
    # hasattr(preempted, "preempted_req_ids"): a set has no such attribute (0.1.0); the
    # object 0.2.0 passes is the form the test looks for, so set(preempted) is not run
    for release in ("0.1.0", "0.2.0"):
        assert not _errors(matrix, "good.HasattrConnector", release)
    notes = [f.message for f in _kinds(matrix, "good.HasattrConnector", "0.2.0")["guarded"]]
    assert any("uses 'preempted' as a collection" in n and 'hasattr(preempted, '
               '"preempted_req_ids") at line 96: the if branch runs on vLLM 0.2.0' in n
               for n in notes)
    assert any(n.startswith("start_load_kv uses self._old_helper") and
               "not hasattr(self, \"_old_helper\") at line 103: the if branch runs" in n
               for n in notes)  # the early return leaves the rest of the method out
    # the same test, with the use on the side that runs where the member is missing
    assert not _errors(matrix, "good.WrongHasattrConnector", "0.1.0")
    (f,) = _errors(matrix, "good.WrongHasattrConnector", "0.2.0")
    assert f.kind == "removed-member" and f.where == "toyconn/good.py:114"


def test_version_comparisons_pick_the_branch(matrix: Matrix) -> None:
    for release in ("0.1.0", "0.2.0"):
        assert not _errors(matrix, "good.VersionBranchConnector", release)
    kinds = _kinds(matrix, "good.VersionBranchConnector", "0.2.0")
    assert [f.where for f in kinds["guarded"]] == ["toyconn/good.py:121", "toyconn/good.py:124",
                                                   "toyconn/good.py:128", "toyconn/good.py:129"]
    old = _kinds(matrix, "good.VersionBranchConnector", "0.1.0")["guarded"]
    assert old[1].message.endswith("VLLM_VERSION < (0, 2) at line 128: the if branch runs on "
                                   "vLLM 0.1.0")
    # the comparison the wrong way round: 0.2.0 runs the iterating side
    assert not _errors(matrix, "good.WrongVersionConnector", "0.1.0")
    (f,) = _errors(matrix, "good.WrongVersionConnector", "0.2.0")
    assert f.kind == "collection" and f.where == "toyconn/good.py:138"


def test_version_test_evaluated_as_python_does() -> None:
    from kvflowmap.compat.branches import Oracle, evaluate
    o = Oracle("0.10.0", lambda p, t: None, lambda o, n: None, lambda d: "version" in d)
    assert evaluate('vllm.__version__ >= "0.9"', o) == (False, "version")  # str compare
    assert evaluate('Version(vllm.__version__) >= Version("0.9")', o) == (True, "version")
    assert evaluate("vllm_version < (0, 10)", o) == (False, "version")
    assert evaluate('not (vllm_version >= "0.1" and hasattr(x, "y"))', o) == (None, "version")
    assert evaluate("x > 3", o) == (None, None)


def test_try_except_type_error_checks_the_fallback(matrix: Matrix) -> None:
    # GuardedConnector: super().__init__ with kv_cache_config, the old call on TypeError
    for release, where in (("0.1.0", "toyconn/good.py:20"), ("0.2.0", "toyconn/good.py:22")):
        assert not _errors(matrix, "good.GuardedConnector", release)
        (g,) = [f for f in _kinds(matrix, "good.GuardedConnector", release)["guarded"]
                if "super().__init__" in f.message]
        assert g.where == where
    # TryWrongConnector: on 0.1.0 the fallback runs, and does not fit either
    (f,) = _errors(matrix, "good.TryWrongConnector", "0.1.0")
    assert f.kind == "base-call" and f.where == "toyconn/good.py:148"
    assert "with 4 positional arguments (it takes 2)" in f.message
    assert not _errors(matrix, "good.TryWrongConnector", "0.2.0")  # the try body runs


def test_base_call_without_a_new_required_parameter(matrix: Matrix) -> None:
    assert not _errors(matrix, "bad.OldInitConnector", "0.1.0")
    (f,) = _errors(matrix, "bad.OldInitConnector", "0.2.0")
    assert f.kind == "base-call" and f.where == "toyconn/bad.py:60"
    assert f.message.startswith("__init__ calls super().__init__(…) without kv_cache_config: "
                                "vLLM 0.2.0's base raises TypeError")


def test_return_annotations(matrix: Matrix) -> None:
    old = {f.kind: f for f in _errors(matrix, "bad.OldReturnConnector", "0.1.0")}
    assert set(old) == {"return"}  # get_finished's 3-tuple; request_finished fits 0.1.0
    new = [f for f in _errors(matrix, "bad.OldReturnConnector", "0.2.0") if f.kind == "return"]
    assert [f.where for f in new] == ["toyconn/bad.py:75", "toyconn/bad.py:78",
                                      "toyconn/bad.py:81"]
    # get_transfer_results annotated with get_finished's tuple, not the results object
    assert new[0].message == ("get_transfer_results returns tuple[set[str], set[str]]; vLLM "
                              "0.2.0's base returns KVConnectorTransferResults")
    assert "returns a 3-tuple" in new[1].message and "a 2-tuple" in new[1].message
    assert new[2].message == ("request_finished returns bool; vLLM 0.2.0's base returns "
                              "tuple[bool, dict | None] (the annotation of vLLM 0.1.0's base)")
    for release in ("0.1.0", "0.2.0"):  # no annotation: nothing compared
        assert not _errors(matrix, "bad.UnannotatedReturnConnector", release)


def test_hook_without_a_caller_left(matrix: Matrix) -> None:
    assert "no-caller" not in _kinds(matrix, "bad.OldReturnConnector", "0.1.0")
    (f,) = _kinds(matrix, "bad.OldReturnConnector", "0.2.0")["no-caller"]
    assert f.severity == "warning" and f.where == "toyconn/bad.py:84"
    assert f.message.startswith("get_block_ids_with_load_errors: vLLM 0.2.0's base still "
                                "declares it, but nothing in vLLM 0.2.0 calls it (vLLM 0.1.0 did")


def test_is_none_guard_and_a_subclass_test(matrix: Matrix) -> None:
    # if kv_cache_config is not None: 0.1.0 does not pass it (the default None runs),
    # 0.2.0 requires it (never None): each release runs the call that fits it
    for release, where, side in (("0.1.0", "toyconn/good.py:170", "the other branch"),
                                 ("0.2.0", "toyconn/good.py:172", "the if branch")):
        assert not _errors(matrix, "good.NoneGuardConnector", release)
        (g,) = [f for f in _kinds(matrix, "good.NoneGuardConnector", release)["guarded"]
                if f.where == where]
        assert g.message.endswith(f"kv_cache_config is not None at line 169: {side} runs on "
                                  f"vLLM {release}")
    # isinstance(preempted, ToyMetadata): a set never is one; KVConnectorMetadata may be
    notes = {r: [f.message for f in _kinds(matrix, "good.NoneGuardConnector", r)["guarded"]
                 if "ToyMetadata" in f.message][0] for r in ("0.1.0", "0.2.0")}
    assert notes["0.1.0"].endswith("the other branch runs")
    assert notes["0.2.0"].endswith("either branch may run (a subclass of what it passes)")


def test_base_call_inside_an_expression_over_two_lines(matrix: Matrix) -> None:
    for release in ("0.1.0", "0.2.0"):
        f = _errors(matrix, "bad.ExtraArgConnector", release)[-1]
        assert f.kind == "base-call" and f.where == "toyconn/bad.py:103"
        assert "super().request_finished(…) with 3 positional arguments (it takes 2)" in f.message
    # KVConnectorBase_V1.__init__(self, vllm_config, role): self is not a parameter
    assert not _errors(matrix, "bad.ExtraArgConnector", "0.1.0")[:-1]
    (f, _) = _errors(matrix, "bad.ExtraArgConnector", "0.2.0")
    assert f.where == "toyconn/bad.py:100" and "KVConnectorBase_V1.__init__(…) without " \
        "kv_cache_config" in f.message
