"""A fuzzer of masterd's luxi side, against a real masterd: raw frames (bytes,
JSON of every shape, known methods with random arguments) and opcode bodies
submitted with SubmitJob.

Every frame must get exactly one answer in luxi's form, the connection stays
open, masterd stays alive, and its log gets no traceback.  A filter rule
rejects every job, so that an opcode that happens to be valid is queued and
cancelled at once: nothing the fuzzer submits ever runs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral import errors
from corral.luxi import protocol
from corral.process.daemons import running_pid
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.jobs import RawLuxi
from tests.helpers.opcodes import SERVED, with_required

pytestmark = pytest.mark.slow

FUZZ = settings(
    max_examples=2500,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)
# Methods whose success would change what the other cases run against (the
# rejecting rule, the drain flag); their argument checks have their own tests.
STATEFUL = {"ReplaceFilter", "DeleteFilter", "SetDrainFlag"}
METHODS = sorted(protocol.METHODS - STATEFUL)
ERROR_CLASSES = {cls.__name__ for cls in vars(errors).values() if isinstance(cls, type)}


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("luxi-fuzz")) as cluster:
        with cluster.client() as client:
            client.call("ReplaceFilter", None, 0, [], "REJECT", [])
        yield cluster


@pytest.fixture(scope="module")
def raw(cl: TestCluster) -> Iterator[RawLuxi]:
    with RawLuxi(cl.paths.master_socket, timeout=30) as conn:
        yield conn


def log_text(cl: TestCluster) -> str:
    return cl.paths.daemon_log("corral-masterd").read_text(errors="replace")


@pytest.fixture(autouse=True)
def no_traceback(cl: TestCluster) -> Iterator[None]:
    """After each test: masterd alive, and no traceback or internal error logged."""
    yield
    assert running_pid(cl.paths.pid_file("corral-masterd")) is not None
    text = log_text(cl)
    assert "Traceback" not in text, text[text.index("Traceback") - 2000 :][:6000]
    assert "Internal error" not in text


def check_answer(answer: bytes) -> dict[str, Any]:
    """One luxi answer: success and result, a failure carrying a known error
    class or luxid's plain parse-error string, never an internal error."""
    msg = json.loads(answer)
    assert isinstance(msg, dict) and isinstance(msg.get("success"), bool), msg
    result = msg["result"]
    if not msg["success"]:
        if isinstance(result, str):
            assert result.startswith("Failed to parse request"), result
        else:
            assert isinstance(result, list) and len(result) == 2, result
            assert result[0] in ERROR_CLASSES and result[0] != "ProgrammerError", result
            assert "Internal error" not in json.dumps(result), result
    return msg


# JSON values of every kind, and (less often) what Python's encoder can say
# beyond what luxi takes: NaN, infinities, lone surrogates (as \udXXX
# escapes), integers beyond 64 bits.
tame_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(["", "default", "node1.example.com", "OP_TEST_DELAY", "id", "name", "job"]),
)
wild_scalars = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3),
)
scalars = st.one_of(*[tame_scalars] * 6, wild_scalars)


def containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=8), inner, max_size=5)
    )


json_values = st.recursive(scalars, containers, max_leaves=20)
tame_json = st.recursive(tame_scalars, containers, max_leaves=10)
deep = st.integers(min_value=50, max_value=100_000).map(lambda n: "[" * n + "]" * n)


def encode(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode()


def request(method: Any, args: Any) -> bytes:
    return encode({"method": method, "args": args})


# Each method's number of arguments, and values close to what it takes: job
# ids, field names, resource names, query filters, timeouts.
ARITY = {
    "SubmitJob": (1, 1), "SubmitJobToDrainedQueue": (1, 1), "SubmitManyJobs": (1, 1),
    "WaitForJobChange": (5, 5), "PickupJob": (1, 1), "CancelJob": (1, 2), "ArchiveJob": (1, 1),
    "AutoArchiveJobs": (2, 2), "ChangeJobPriority": (2, 2), "QueryJobs": (2, 2),
    "Query": (2, 3), "QueryFields": (1, 2), "QueryClusterInfo": (0, 0),
    "QueryConfigValues": (1, 1), "QueryTags": (1, 2), "QueryInstances": (3, 3),
    "QueryNodes": (3, 3), "QueryGroups": (3, 3), "QueryNetworks": (3, 3),
    "QueryExports": (2, 2), "SetWatcherPause": (1, 1), "QueryFilters": (2, 2),
    "CreateJoinToken": (1, 1), "TakeMastership": (0, 1), "CorralMetrics": (0, 0),
}  # fmt: skip
FIELDS = ["id", "status", "name", "summary", "ops", "tags", "uuid", "pnode", "oper_state"]
field_names = st.sampled_from(FIELDS)
query_filters = st.recursive(
    st.one_of(
        st.tuples(st.sampled_from(["=", "==", "!=", "<", ">=", "=[]"]), field_names, scalars),
        st.tuples(st.just("=~"), field_names, st.sampled_from(["^a", "(a|a)+$", "[", "x{99}"])),
        st.tuples(st.just("?"), field_names),
    ).map(list),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: ["|", *xs]),
        st.lists(inner, max_size=3).map(lambda xs: ["&", *xs]),
        inner.map(lambda x: ["!", x]),
    ),
    max_leaves=6,
)
plausible = st.one_of(
    json_values,
    st.integers(min_value=-2, max_value=40),
    st.floats(min_value=-1, max_value=2),
    st.lists(field_names, max_size=4),
    st.sampled_from(["job", "instance", "node", "group", "os", "lock", "cluster", "filter"]),
    query_filters,
)


@st.composite
def method_calls(draw: st.DrawFn) -> bytes:
    method = draw(st.sampled_from(METHODS))
    low, high = ARITY[method]
    count = draw(st.integers(min_value=low, max_value=high))
    return request(method, [draw(plausible) for _ in range(count)])


frames = st.one_of(
    st.binary(max_size=300).map(lambda b: b.replace(protocol.ETX, b"")),
    json_values.map(encode),
    st.builds(request, st.sampled_from(METHODS), json_values),
    st.builds(request, st.sampled_from(METHODS), st.lists(json_values, max_size=6)),
    method_calls(),
    method_calls(),
    st.builds(
        lambda method, depth: f'{{"method": "{method}", "args": [{depth}]}}'.encode(),
        st.sampled_from(METHODS),
        deep,
    ),
    deep.map(str.encode),
)


@FUZZ
@given(frame=frames)
def test_every_frame_gets_an_answer(cl: TestCluster, raw: RawLuxi, frame: bytes) -> None:
    check_answer(raw.exchange(frame + protocol.ETX))


OP_IDS = sorted(SERVED)
# Values close to what opcode fields take, and just past it.
field_values = st.one_of(
    tame_json,
    tame_json,
    json_values,
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(),
    st.sampled_from(["../x", "/etc", "a/b", "x" * 300, "loop", "default", "deb+default", " "]),
    st.lists(st.sampled_from(["add", "remove", "x", "../x", "node1.example.com"]), max_size=3),
    st.dictionaries(st.sampled_from(["deb", "a/b", "x y", "size", "mode"]), tame_json),
)


@st.composite
def opcodes(draw: st.DrawFn) -> Any:
    """An opcode body: a served OP_ID with its required fields, then some of
    its fields (or unknown ones) set to random values; or anything at all."""
    op_id = draw(st.one_of(st.sampled_from(OP_IDS), st.sampled_from(OP_IDS), json_values))
    if not (isinstance(op_id, str) and op_id in SERVED):
        return {"OP_ID": op_id, **draw(st.dictionaries(st.text(max_size=8), json_values))}
    body = with_required(op_id)
    names = [*sorted(SERVED[op_id].model_fields), "OP_ID", "no_such_field"]
    for name in draw(st.lists(st.sampled_from(names), max_size=4, unique=True)):
        body[name] = draw(field_values)
    return body


jobs = st.lists(opcodes(), min_size=1, max_size=3)


@FUZZ
@given(
    frame=st.one_of(
        st.builds(lambda ops: request("SubmitJob", [ops]), jobs),
        st.builds(lambda ops: request("SubmitJob", [ops]), json_values),
        st.builds(lambda many: request("SubmitManyJobs", [many]), st.lists(jobs, max_size=3)),
    )
)
def test_every_opcode_body_gets_an_answer(cl: TestCluster, raw: RawLuxi, frame: bytes) -> None:
    check_answer(raw.exchange(frame + protocol.ETX))
